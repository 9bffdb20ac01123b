package oncekey_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// ErrorText is the table's text of the label, with the wait of in_flight and the reviewer's
// message, within MaxErrorTextBytes; a message a model must not read (control characters, too
// long) is left out.
func TestErrorText(t *testing.T) {
	for _, e := range oncekey.ModelTexts() {
		tr := oncekey.ToolResult{Status: e.Status, NextAction: e.Next, Reason: e.Reason}
		require.Equal(t, e.Text, oncekey.ErrorText(tr))
	}
	inFlight := oncekey.ToolResult{Status: oncekey.OutcomeInFlight, NextAction: oncekey.NextPoll, RetryAfter: 2500 * time.Millisecond}
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeInFlight, oncekey.NextPoll, "")+" retry_after_seconds: 3.", oncekey.ErrorText(inFlight))

	denied := oncekey.ToolResult{Status: oncekey.OutcomeRejected, NextAction: oncekey.NextStop, Reason: oncekey.ReasonDenied,
		Message: strings.Repeat("x", oncekeystore.MaxModelMessageBytes)}
	text := oncekey.ErrorText(denied)
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeRejected, oncekey.NextStop, oncekey.ReasonDenied)+" Reviewer's message: "+denied.Message, text)
	require.LessOrEqual(t, len(text), oncekey.MaxErrorTextBytes)

	for _, bad := range []string{strings.Repeat("x", oncekeystore.MaxModelMessageBytes+1), "run `rm -rf`\x1b[0m"} {
		denied.Message = bad
		require.Equal(t, oncekey.ModelText(oncekey.OutcomeRejected, oncekey.NextStop, oncekey.ReasonDenied), oncekey.ErrorText(denied))
	}
}
