package inbox

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// A decision delivered to a workflow no worker runs is answered within ConfirmWait as delivered,
// not confirmed, naming the workflow's task queue (escaped) and that it lands once a worker runs
// there, with no need to send it again, as the CLI says (exit 6): for a resolution and for an
// approval.
func TestUnconfirmedDecisionNamesTheTaskQueue(t *testing.T) {
	for _, tc := range []struct {
		name, what, workflow, path string
		prepare                    func(e *env, tool string) (key string, form url.Values)
		id                         func(key string) string
	}{
		{"resolution", "reconciliation workflow", reconcile.WorkflowName, "/resolve", func(e *env, tool string) (string, url.Values) {
			key, epoch := e.seed("acme", tool, oncekeystore.StatusUnknown, nil, `{}`)
			return key, url.Values{"epoch": {strconv.FormatInt(epoch, 10)}, "outcome": {"not_applied"}}
		}, reconcile.WorkflowID},
		{"approval", "approval workflow", reconcile.ApprovalWorkflowName, "/decide", func(e *env, tool string) (string, url.Values) {
			return e.ask("acme", tool, "refund 120.00 EUR"), url.Values{"episode": {"1"}, "decision": {"approve"}}
		}, reconcile.ApprovalWorkflowID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := testenv.Temporal(t)
			e := setup(t, func(o *Options) { o.Temporal = c })
			tool := "Book" + strings.ToUpper(tc.name[:1]) + tc.name[1:]
			key, form := tc.prepare(e, tool)
			// The workflow runs on a task queue no worker ever polled, so nothing takes the decision.
			tq := "inbox-<b>" + t.Name() + "</b>"
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: tc.id(key), TaskQueue: tq}, tc.workflow)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), tc.id(key), "", "test over") })

			cookie, tok := e.session("/", nil)
			form.Set("tenant", "acme")
			form.Set("key", key)
			form.Set("csrf", tok)
			start := time.Now()
			res, body := e.req("POST", tc.path, form, withCookie(cookie))
			require.Less(t, time.Since(start), reconcile.ConfirmWait+2*statusWait+3*time.Second, "ConfirmWait, the task queue's and the page's questions")
			require.Equal(t, http.StatusAccepted, res.StatusCode, body)
			require.Contains(t, body, "Delivered, not yet confirmed")
			noun := map[string]string{"resolution": "resolution", "approval": "decision"}[tc.name]
			require.Contains(t, body, "The "+noun+" was delivered to the "+tc.what+" "+tc.id(key)+", but it did not accept or refuse it within 10s: "+
				"no worker has polled task queue "+template.HTMLEscapeString(shell.Word(tq))+" (the "+tc.what+"&#39;s) for minutes: start one there for it to land; "+
				"it is taken once a worker runs the workflow, with no need to send it again. Reload this page to see whether it was recorded.")
			require.NotContains(t, body, "<b>"+t.Name(), "the task queue is escaped")
		})
	}
}
