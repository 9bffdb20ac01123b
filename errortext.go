package oncekey

import (
	"fmt"
	"math"

	"github.com/oncekey/oncekey/oncekeystore"
)

// MaxErrorTextBytes is the most bytes ErrorText returns: the longest text of the table of texts
// for a model (300 bytes), the reviewer's message (oncekeystore.MaxModelMessageBytes) and the words around them.
const MaxErrorTextBytes = 300 + oncekeystore.MaxModelMessageBytes + 100

// ErrorText returns the message of an error oncekey returns to a workflow (the message of its
// temporal.ApplicationError, which err.Error() prints and an agent loop may hand to its model),
// for the error labelled tr (Label): tr.Text, the fixed text for a model of its status, next action
// and reason (ModelText), then, when tr has them, how long to wait before asking again
// ("retry_after_seconds: 3.") and what the person who decided the call's approval said to the model
// ("Reviewer's message: …", tr.Message). At most MaxErrorTextBytes bytes, with no operator detail:
// no schema, workflow or run ID, operation key, command or flag. What an operator needs travels in
// the error's details (oncekey.Details.Message), the logs, the CLI and the inbox.
func ErrorText(tr ToolResult) string {
	text := ModelText(tr.Status, tr.NextAction, tr.Reason)
	if tr.Status == OutcomeInFlight && tr.RetryAfter > 0 {
		text += fmt.Sprintf(" retry_after_seconds: %d.", int64(math.Ceil(tr.RetryAfter.Seconds())))
	}
	if tr.Message != "" && oncekeystore.ModelMessageProblem(tr.Message) == "" {
		text += " Reviewer's message: " + tr.Message
	}
	return text
}
