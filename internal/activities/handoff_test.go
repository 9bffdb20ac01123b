package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
)

// HandOffOf finds a hand-off only in a record that waits (pending or unknown) at the epoch the
// hand-off was made at: a settled record, a later episode, or another document has none.
func TestHandOffOf(t *testing.T) {
	h := &failuredoc.HandOff{Epoch: 2, WorkflowID: "wf", RunID: "run", ActivityID: "5", Attempt: 1, At: time.Now(), Deadline: time.Now().Add(time.Minute)}
	doc := failuredoc.Doc{Message: "handed off", HandOff: h}.Bytes()
	for _, c := range []struct {
		name string
		rec  oncekeystore.Record
		want bool
	}{
		{"pending", oncekeystore.Record{Status: oncekeystore.StatusPending, Epoch: 2, Failure: doc}, true},
		{"unknown", oncekeystore.Record{Status: oncekeystore.StatusUnknown, Epoch: 2, Failure: doc}, true},
		{"later episode", oncekeystore.Record{Status: oncekeystore.StatusPending, Epoch: 3, Failure: doc}, false},
		{"settled", oncekeystore.Record{Status: oncekeystore.StatusFailed, Epoch: 2, Failure: doc}, false},
		{"no hand-off", oncekeystore.Record{Status: oncekeystore.StatusUnknown, Epoch: 2, Failure: failuredoc.Doc{Message: "lease lost"}.Bytes()}, false},
		{"not a document", oncekeystore.Record{Status: oncekeystore.StatusUnknown, Epoch: 2, Failure: []byte("text")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := HandOffOf(&c.rec)
			require.Equal(t, c.want, ok)
			if ok {
				require.Equal(t, h.ActivityID, got.ActivityID)
				require.Equal(t, h.RunID, got.RunID)
			}
		})
	}
}
