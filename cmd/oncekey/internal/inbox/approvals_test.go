package inbox

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/recordtest"
	"github.com/oncekey/oncekey/oncekeystore"
)

// ask asks for approval of (tenant, tool) as the approval workflow does and returns the key.
func (e *env) ask(tenant, tool, summary string) string {
	e.t.Helper()
	return recordtest.Ask(e.t, e.store, tenant, "wf-"+tool, "s1", tool, summary)
}

// The inbox lists pending approvals in a queue of their own, oldest first, per tenant, with the
// policy's summary; decided ones are not listed; a token sees its tenants' only; stored strings
// are escaped.
func TestApprovalQueue(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	evil := `<script>alert(1)</script>`
	acme := e.ask("acme", "IssueRefund", "refund 120.00 EUR on order 42 "+evil)
	globex := e.ask("globex", "DeleteAccount", "delete the account of globex")
	denied := e.ask("acme", "SendNewsletter", "newsletter to everyone")
	_, err := e.store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: denied, Episode: 1,
		Status: oncekeystore.ApprovalDenied, DecidedBy: "omar", Reason: "no", Retention: time.Hour})
	require.NoError(t, err)

	res, body := e.req("GET", "/", nil, bearer(inesToken))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `id="queue-approvals"`)
	require.Contains(t, body, "refund 120.00 EUR on order 42 &lt;script&gt;alert(1)&lt;/script&gt;")
	require.NotContains(t, body, "<script>alert")
	require.Contains(t, body, "delete the account of globex")
	require.NotContains(t, body, "newsletter to everyone", "a decided approval waits for nobody")
	require.Contains(t, body, approvalLinkHTML("acme", acme))
	require.Contains(t, body, "in 59m")

	_, body = e.req("GET", "/", nil, bearer(acmeToken))
	require.Contains(t, body, "refund 120.00 EUR")
	require.NotContains(t, body, "delete the account of globex")
	res, body = e.req("GET", approvalLink("globex", globex), nil, bearer(acmeToken))
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.NotContains(t, body, "delete the account")

	// The approval's page: the summary, the fields; with no Temporal to ask, no form.
	res, body = e.req("GET", approvalLink("acme", acme), nil, bearer(acmeToken))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `id="approval-summary">refund 120.00 EUR on order 42 &lt;script&gt;`)
	require.Contains(t, body, "<dt>Episode</dt><dd class=\"v\">1</dd>")
	require.Contains(t, body, "Could not ask the approval workflow where it stands")
	require.NotContains(t, body, `id="decide-form"`)
	require.Contains(t, body, "none yet: the call has not run")

	res, body = e.req("GET", approvalLink("acme", denied), nil, bearer(acmeToken))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "<dt>Decided</dt>")
	require.Contains(t, body, "by omar")
	require.NotContains(t, body, "Could not ask", "a decided approval has no workflow to ask")

	res, _ = e.req("GET", approvalLink("initech", acme), nil, bearer(inesToken))
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// A decision the form cannot send is refused on the page, and nothing is sent: a denial without a
// reason, a form whose approval was decided or asked anew since it was loaded, another tenant's
// approval.
func TestDecideFormRefusals(t *testing.T) {
	var log recordtest.SyncBuffer
	e := setup(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	key := e.ask("acme", "IssueRefund", "refund 120.00 EUR")
	cookie, tok := e.session("/", nil)
	post := func(decision, reason string, episode int64) (*http.Response, string) {
		return e.req("POST", "/decide", url.Values{"tenant": {"acme"}, "key": {key}, "episode": {strconv.FormatInt(episode, 10)},
			"decision": {decision}, "reason": {reason}, "csrf": {tok}}, withCookie(cookie))
	}
	res, body := post("deny", "  ", 1)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
	require.Contains(t, body, "a denial needs a reason")
	require.Contains(t, body, "Nothing was sent")
	res, body = post("maybe", "", 1)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
	require.Contains(t, body, "the decision is not valid")
	res, body = post("approve", "", 0)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
	require.Contains(t, body, "the form names no episode")
	res, body = post("approve", "", 2)
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "The form showed episode 2; the approval is now pending at episode 1")

	// Someone else decides; the form shown before is refused although its episode matches.
	_, err := e.store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: 1,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "omar", Retention: time.Hour})
	require.NoError(t, err)
	res, body = post("deny", "too much", 1)
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "the approval is now approved at episode 1, decided by omar")
	ap, err := e.store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, ap.Status, "the earlier decision stands")
	require.Equal(t, 5, strings.Count(log.String(), `msg="approval decision" by="ines (oncekey-serve)" tenant=acme key=`+key), log.String())
}

// A token limited to one tenant cannot decide another's approval.
func TestDecideOtherTenantIsForbidden(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	key := e.ask("globex", "DeleteAccount", "delete")
	cookie, tok := e.session("/", bearer(acmeToken))
	res, body := e.req("POST", "/decide", url.Values{"tenant": {"globex"}, "key": {key}, "episode": {"1"}, "decision": {"approve"}, "csrf": {tok}},
		both(bearer(acmeToken), withCookie(cookie)))
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	ap, err := e.store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "globex", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, ap.Status)
}

// approvalLinkHTML is approvalLink as html/template writes it into an href.
func approvalLinkHTML(tenant, key string) string {
	return strings.ReplaceAll(approvalLink(tenant, key), "&", "&amp;")
}

// A record whose operation had an approval links to it from its page.
func TestRecordPageLinksItsApproval(t *testing.T) {
	e := setup(t, nil)
	key, _ := e.seed("acme", "IssueRefund", oncekeystore.StatusApplied, nil, "")
	res, err := e.store.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: "acme", OperationKey: key, Namespace: "default",
		Tool: "IssueRefund", Fingerprint: strings.Repeat("ab", 32), WorkflowID: "wf-IssueRefund", StepID: "s1", Summary: "refund", Timeout: time.Hour})
	require.NoError(t, err)
	require.True(t, res.Created)
	_, err = e.store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: 1,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "omar <script>", Retention: time.Hour})
	require.NoError(t, err)
	_, body := e.req("GET", recordLink("acme", key, false), nil, nil)
	require.Contains(t, body, `<dd class="v" id="record-approval"><a href="`+approvalLinkHTML("acme", key)+`">approved, episode 1, by omar &lt;script&gt; at `)
	_, body = e.req("GET", approvalLink("acme", key), nil, nil)
	require.Contains(t, body, `<dd class="v" id="approval-record"><a href="`+strings.ReplaceAll(recordLink("acme", key, false), "&", "&amp;")+`">applied, epoch 1</a>`)

	other, _ := e.seed("acme", "Book", oncekeystore.StatusApplied, nil, "")
	_, body = e.req("GET", recordLink("acme", other, false), nil, nil)
	require.NotContains(t, body, "record-approval", "no approval, no line")
}

// The form's message for the model and edited arguments are checked before anything is sent,
// and kept in the form when refused; an approval replaced by an edit links the edit, and the
// edit the call it replaced.
func TestDecideFormMessageAndEdit(t *testing.T) {
	e := setup(t, nil)
	key := e.ask("acme", "IssueRefund", "refund 190.00 EUR")
	cookie, tok := e.session("/", nil)
	post := func(decision, message, args string) (*http.Response, string) {
		return e.req("POST", "/decide", url.Values{"tenant": {"acme"}, "key": {key}, "episode": {"1"}, "decision": {decision},
			"reason": {"ops note"}, "message": {message}, "arguments": {args}, "csrf": {tok}}, withCookie(cookie))
	}
	for _, c := range []struct{ decision, message, args, want string }{
		{"request_changes", "", "", "a request for changes needs a message"},
		{"deny", "red\x1b[31m", "", "control character"},
		{"deny", "", `{"amount_cents":9500}`, "only an approval takes edited arguments"},
		{"approve", "", `[9500]`, "must be one JSON object"},
	} {
		res, body := post(c.decision, c.message, c.args)
		require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
		require.Contains(t, body, c.want)
		require.Contains(t, body, "Nothing was sent")
	}
	ap, err := e.store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, ap.Status)

	// Replaced by an edit, as the DecideApproval activity records it.
	edit, err := oncekey.EditKey(ap.Namespace, "acme", key, 1)
	require.NoError(t, err)
	res, err := e.store.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: "acme", OperationKey: edit, Namespace: ap.Namespace,
		Tool: ap.Tool, Fingerprint: "fp-edit", Summary: "refund 95.00 EUR", Token: "e1_x", Timeout: time.Hour, EditOf: key})
	require.NoError(t, err)
	_, err = e.store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: edit, Episode: 1,
		Token: res.Approval.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: "ines", Retention: time.Hour})
	require.NoError(t, err)
	_, err = e.store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: 1,
		Token: ap.Token, Status: oncekeystore.ApprovalReplaced, DecidedBy: "ines", Retention: time.Hour, EditedAs: edit})
	require.NoError(t, err)
	_, body := e.req("GET", approvalLink("acme", key), nil, withCookie(cookie))
	require.Contains(t, body, "Replaced by the edit")
	require.Contains(t, body, approvalLinkHTML("acme", edit))
	_, body = e.req("GET", approvalLink("acme", edit), nil, withCookie(cookie))
	require.Contains(t, body, "Edit of")
	require.Contains(t, body, approvalLinkHTML("acme", key))
}
