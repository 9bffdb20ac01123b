package interceptor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
)

// The call's error when its approval workflow failed says what to do for the failure: a refusal
// that asking again meets the same way (another tool's or namespace's approval, a configuration
// error), found anywhere in the chain the SDK delivers, says what to fix; anything else says to
// call again.
func TestUndecidedSaysWhatToDo(t *testing.T) {
	a := &approvalCall{scheduled: scheduled{name: "CreateTicket", tenant: "acme corp"}}
	chain := func(typ string) error {
		return fmt.Errorf("child workflow failed: %w", fmt.Errorf("activity failed: %w",
			temporal.NewNonRetryableApplicationError("the approval is of tool \"SendMoney\"", typ, nil)))
	}
	for _, c := range []struct {
		err      error
		want     []string
		notWants string
	}{
		{chain(activities.ErrTypeForeignRecord), []string{"refused to ask for CreateTicket", "calling it again is refused the same way",
			"oncekey.WithStepID", "`oncekey show ok1_k --tenant 'acme corp'`"}, "call it again to ask anew"},
		{chain(oncekey.ErrTypeConfig), []string{"could not ask for CreateTicket", "calling it again fails the same way",
			"Fix what the error names"}, "call it again to ask anew"},
		{chain(activities.ErrTypeInvalid), []string{"ended without a decision", "call it again to ask anew"}, "the same way"},
		{errors.New("workflow terminated"), []string{"ended without a decision", "call it again to ask anew"}, "the same way"},
	} {
		err := a.undecided("ok1_k", c.err)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
		require.True(t, appErr.NonRetryable())
		d, ok := oncekey.ErrorDetails(err)
		require.True(t, ok)
		for _, w := range c.want {
			require.Contains(t, d.Message, w)
		}
		require.NotContains(t, d.Message, c.notWants)
		require.Equal(t, oncekey.ModelText(oncekey.OutcomeRejected, oncekey.NextAsk, oncekey.ReasonNotApproved), appErr.Message(),
			"the workflow's message is the text for a model")
	}
}
