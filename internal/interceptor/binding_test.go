package interceptor_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
)

// With Options.HeaderKeys, the workflow side binds the headers it sets and the activity side
// verifies them: calls in a tenant at a step ID run once and their repeat replays; an Effectful
// re-run of a call without a step ID (its first activity ID header bound again) runs once.
func TestSuiteHeaderBinding(t *testing.T) {
	ds := newDownstream()
	mem := memstore.New(nil)
	keys := []oncekey.HeaderKey{{ID: "k1", Secret: bytes.Repeat([]byte{7}, 32)}}
	env := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		store: func(oncekeystore.Store) oncekeystore.Store { return mem },
		opts:  func(o *interceptor.Options) { o.HeaderKeys = keys }})
	out := env.run(t, workflowInput{Tenant: "acme", Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err, out[0].Detail)
	require.Empty(t, out[1].Err, out[1].Detail)
	require.Equal(t, out[0].Ticket, out[1].Ticket, "the repeat replays")
	effects, _ := ds.counts()
	require.Equal(t, 1, effects)
	res, err := mem.List(context.Background(), &oncekeystore.ListParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
}

func TestHeaderKeysInvalid(t *testing.T) {
	for name, keys := range map[string][]oncekey.HeaderKey{
		"short secret": {{ID: "k1", Secret: []byte("short")}},
		"bad ID":       {{ID: "k 1", Secret: bytes.Repeat([]byte{1}, 32)}},
		"duplicate ID": {{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}, {ID: "k1", Secret: bytes.Repeat([]byte{2}, 32)}},
	} {
		_, err := interceptor.New(interceptor.Options{Store: memstore.New(nil), Registry: oncekey.NewRegistry(), HeaderKeys: keys})
		var ce *interceptor.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, "HeaderKeys", ce.Field, name)
	}
}

func TestHeaderKeysReportOnlyNeedsKeys(t *testing.T) {
	_, err := interceptor.New(interceptor.Options{Store: memstore.New(nil), Registry: oncekey.NewRegistry(), HeaderKeysReportOnly: true})
	var ce *interceptor.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "HeaderKeysReportOnly", ce.Field)
}
