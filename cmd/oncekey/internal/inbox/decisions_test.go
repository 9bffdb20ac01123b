package inbox

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// The log line of an accepted decision says what was decided, by whom, for which key and at which
// epoch (a resolution) or episode (an approval), although the page's form is cleared: on a real
// reconciliation and approval workflow, whose calls then land their effect once each.
func TestAcceptedDecisionIsLogged(t *testing.T) {
	l := setupLive(t, nil)
	key, epoch, run := l.waitingUnknown(t)
	cookie, tok := l.session("/", nil)
	res, body := l.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)},
		"outcome": {"applied"}, "effect_reference": {"BK-R1"}, "result": {`"BK-R1"`}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "Accepted: recorded as applied")
	require.Equal(t, "BK-R1", wait(t, run))
	require.Len(t, l.lines(`msg=decision by="ines (oncekey-serve)" tenant=acme key=`+key+` epoch=`+strconv.FormatInt(epoch, 10)+
		` outcome=applied answer=accepted`), 1, l.log.String())
	require.Empty(t, l.lines(`outcome=""`), l.log.String())

	key, episode, run := l.waitingApproval(t)
	res, body = l.req("POST", "/decide", url.Values{"tenant": {"acme"}, "key": {key}, "episode": {strconv.FormatInt(episode, 10)},
		"decision": {"approve"}, "reason": {"checked"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "Accepted: approved")
	require.Equal(t, "RF-R1", wait(t, run))
	require.Len(t, l.lines(`msg="approval decision" by="ines (oncekey-serve)" tenant=acme key=`+key+` episode=`+strconv.FormatInt(episode, 10)+
		` decision=approve answer=accepted`), 1, l.log.String())
	require.Empty(t, l.lines(`decision=""`), l.log.String())
	require.Equal(t, 2, l.down.count(), "one booking (its lost response settled as applied) and one refund")
}

// A reconciliation or approval workflow that was terminated is shown as closed, saying how and
// when, with no form (Temporal still answers its query), and with what works instead: the
// command that writes the decision straight to the store, or the next call asking again.
func TestClosedWorkflowIsShownClosed(t *testing.T) {
	l := setupLive(t, nil)
	key, epoch, _ := l.waitingUnknown(t)
	_, body := l.req("GET", recordLink("acme", key, false), nil, nil)
	require.Contains(t, body, `id="resolve-form"`, "the workflow waits: the form is live")
	require.NoError(t, l.c.TerminateWorkflow(context.Background(), reconcile.WorkflowID(key), "", "by hand"))
	_, err := reconcile.Status(context.Background(), l.c, key)
	require.NoError(t, err, "Temporal still answers the closed workflow's query")

	res, body := l.req("GET", recordLink("acme", key, false), nil, nil)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.NotContains(t, body, `id="resolve-form"`)
	require.NotContains(t, body, "waiting_for_resolution")
	require.Contains(t, body, `data-closed="terminated"`)
	require.Contains(t, body, "The reconciliation workflow "+reconcile.WorkflowID(key)+" was terminated at ")
	require.Contains(t, body, "without a decision: it no longer waits")
	require.Contains(t, body, "`oncekey resolve "+key+" --tenant acme --epoch "+strconv.FormatInt(epoch, 10)+" --direct …`")

	// A form sent anyway is told the same way out.
	cookie, tok := l.session("/", nil)
	res, body = l.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)},
		"outcome": {"not_applied"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "No reconciliation workflow waits for this operation")
	require.Contains(t, body, "--direct …`")

	key, _, _ = l.waitingApproval(t)
	_, body = l.req("GET", approvalLink("acme", key), nil, nil)
	require.Contains(t, body, `id="decide-form"`, "the workflow waits: the form is live")
	require.NoError(t, l.c.TerminateWorkflow(context.Background(), reconcile.ApprovalWorkflowID(key), "", "by hand"))
	res, body = l.req("GET", approvalLink("acme", key), nil, nil)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.NotContains(t, body, `id="decide-form"`)
	require.Contains(t, body, `data-closed="terminated"`)
	require.Contains(t, body, "The approval workflow "+reconcile.ApprovalWorkflowID(key)+" was terminated at ")
	require.Contains(t, body, "The next call of the operation (its workflow running the step again) asks anew")
	require.Contains(t, body, "`oncekey show "+key+" --tenant acme`")
	require.Equal(t, 1, l.down.count(), "the lost booking only; nothing approved the refund")
}

// racing is a store whose next Get (GetApproval) runs a function, as another person's decision
// arriving at that moment, and answers what the store held before it: the inbox's check of the
// form then passes, and the workflow is the one to find the operation decided.
type racing struct {
	*memstore.Store
	mu                        sync.Mutex
	beforeGet, beforeApproval func()
}

func (r *racing) Get(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Record, error) {
	r.mu.Lock()
	f := r.beforeGet
	r.beforeGet = nil
	r.mu.Unlock()
	rec, err := r.Store.Get(ctx, p)
	if f != nil {
		f()
	}
	return rec, err
}

func (r *racing) GetApproval(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Approval, error) {
	r.mu.Lock()
	f := r.beforeApproval
	r.beforeApproval = nil
	r.mu.Unlock()
	ap, err := r.Store.GetApproval(ctx, p)
	if f != nil {
		f()
	}
	return ap, err
}

// Two people deciding at once: the one whose decision comes second is told that the operation
// (the approval) is settled, by whom, how and when, not that the workflow keeps waiting; the first
// decision stands, and each call lands its effect once.
func TestSecondDeciderIsToldWhoDecided(t *testing.T) {
	var rs *racing
	l := setupLive(t, func(s oncekeystore.Store) oncekeystore.Store {
		rs = &racing{Store: s.(*memstore.Store)}
		return rs
	})
	key, epoch, run := l.waitingUnknown(t)
	cookie, tok := l.session("/", nil)
	rs.beforeGet = func() {
		_, err := reconcile.ResolveOutput(context.Background(), l.c, "acme", key, reconcile.Resolution{Epoch: epoch, Outcome: reconcile.Applied,
			EffectReference: "BK-R1", Result: []byte(`"BK-R1"`), ResolvedBy: "omar (oncekey-serve)"})
		require.NoError(t, err)
	}
	res, body := l.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)},
		"outcome": {"not_applied"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "Refused: the operation was already settled")
	require.Regexp(t, `Someone decided first: the operation was settled as applied by omar \(oncekey-serve\) at \d{4}-\d\d-\d\dT[0-9:]+Z \(epoch `+
		strconv.FormatInt(epoch, 10)+`\)\. Nothing was recorded for this decision`, body)
	require.NotContains(t, body, "keeps waiting")
	require.NotContains(t, body, "--direct")
	require.Equal(t, "BK-R1", wait(t, run))
	rec, err := l.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status, "the first decision stands")
	require.Equal(t, "omar (oncekey-serve)", rec.ResolvedBy)

	key, episode, run := l.waitingApproval(t)
	rs.beforeApproval = func() {
		_, err := reconcile.Decide(context.Background(), l.c, key, reconcile.Decision{Decision: reconcile.Approve, Tenant: "acme", Episode: episode,
			DecidedBy: "omar (oncekey-serve)", Reason: "checked"})
		require.NoError(t, err)
	}
	res, body = l.req("POST", "/decide", url.Values{"tenant": {"acme"}, "key": {key}, "episode": {strconv.FormatInt(episode, 10)},
		"decision": {"deny"}, "reason": {"too much"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "Refused: the approval was already decided")
	require.Regexp(t, `Someone decided first: the approval was approved by omar \(oncekey-serve\) at \d{4}-\d\d-\d\dT[0-9:]+Z \(episode `+
		strconv.FormatInt(episode, 10)+`\), reason: checked\. Nothing was recorded for this decision`, body)
	require.Equal(t, "RF-R1", wait(t, run))
	require.Equal(t, 2, l.down.count(), "the lost booking (settled as applied, not run again), and the approved refund once")
}

// The `oncekey resolve --direct` command the record page offers carries a hostile tenant as one
// inert word: read back by bash, it has exactly the key, the tenant and the epoch.
func TestDirectCommandQuotesTheTenant(t *testing.T) {
	c := testenv.Temporal(t)
	e := setup(t, func(o *Options) { o.Temporal = c })
	span := regexp.MustCompile("`(oncekey resolve [^`]*)`")
	for _, v := range shell.Hostile {
		if v == "" || strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
			continue // no tenant the store takes; bash cannot hold a NUL (TestWordPrintsNothingActive covers both)
		}
		key, epoch := e.seed(v, "Book", oncekeystore.StatusUnknown, nil, `{}`)
		res, body := e.req("GET", recordLink(v, key, false), nil, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, body)
		m := span.FindStringSubmatch(html.UnescapeString(body))
		require.NotNil(t, m, "%q: %s", v, body)
		require.Equal(t, []string{"oncekey", "resolve", key, "--tenant", v, "--epoch", strconv.FormatInt(epoch, 10), "--direct", "…"},
			shelltest.Args(t, m[1]), "%q: %s", v, m[1])
	}
}
