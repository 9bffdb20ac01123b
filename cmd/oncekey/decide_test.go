package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/reconcile"
)

// approvalWorker runs a worker whose Book needs approval on a fresh task queue and returns the
// queue.
func approvalWorker(t *testing.T, c client.Client, url string, b *bookings, tenant string) string {
	t.Helper()
	tq := "cli-approve-" + t.Name()
	w := newApprovalWorker(t, c, url, b, tenant, tq)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return tq
}

// newApprovalWorker returns a worker, not started, whose Book needs approval, on task queue tq.
func newApprovalWorker(t *testing.T, c client.Client, url string, b *bookings, tenant, tq string) sdkworker.Worker {
	t.Helper()
	return newWorkerWith(t, c, url, b, tenant, tq, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{
		Summary: func(op oncekey.Operation) string { return "book " + string(op.ArgsJSON) },
	}})
}

// waitingApproval waits until the CLI lists exactly one pending approval and its approval
// workflow waits for a decision; it returns the approval as listed.
func waitingApproval(t *testing.T, c client.Client, env map[string]string) approvalView {
	t.Helper()
	var v approvalView
	require.Eventually(t, func() bool {
		r := cli(t, env, "approvals", "--json")
		var views []approvalView
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &views) != nil || len(views) != 1 {
			return false
		}
		v = views[0]
		rep, err := reconcile.QueryApproval(context.Background(), c, v.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 60*time.Second, 100*time.Millisecond)
	return v
}

// approve runs the call once: a decision for another tenant is refused, the approval (episode
// read from the store) releases the workflow, the downstream lands one booking, show says who
// approved and when, and a second approval says it is decided already.
func TestApproveRunsTheCallOnce(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{}
	run := runBooking(t, c, approvalWorker(t, c, url, b, "acme"))

	ap := waitingApproval(t, c, env)
	require.Equal(t, "acme", ap.Tenant)
	require.Equal(t, "Book", ap.Tool)
	require.Equal(t, `book "R1"`, ap.Summary)
	require.Equal(t, int64(1), ap.Episode)
	effects, runs := b.counts()
	require.Zero(t, effects)
	require.Zero(t, runs, "nothing runs before the decision")
	r := cli(t, env, "show", ap.OperationKey, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^record\s+none yet: the call waits for this approval and has not run$`, r.stdout)

	// Another tenant: refused by the workflow (exit 1, as without --episode), naming the tenant.
	r = cli(t, env, "approve", ap.OperationKey, "--tenant", "globex", "--episode", "1")
	requireOneLine(t, r, exitFailed, "the approval of "+ap.OperationKey+" belongs to tenant acme, not globex", "`oncekey approve "+ap.OperationKey+" --tenant acme --episode 1 --address ")
	r = cli(t, env, "approve", ap.OperationKey, "--tenant", "globex")
	requireOneLine(t, r, exitFailed, "the approval of "+ap.OperationKey+" belongs to tenant acme, not globex")

	r = cli(t, env, "approve", ap.OperationKey, "--tenant", "acme", "--reason", "booked by phone")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "approved "+ap.OperationKey+", episode 1 ("+reconcile.ApprovalWorkflowID(ap.OperationKey)+" accepted it)")
	require.Regexp(t, `the workflow answered: approved, by ines, at \S+Z, reason: booked by phone`, r.stdout)

	out := booked(t, run)
	require.Equal(t, "BK-R1", out.ID)
	effects, runs = b.counts()
	require.Equal(t, 1, effects, "the downstream landed one booking")
	require.Equal(t, 1, runs)

	r = cli(t, env, "show", ap.OperationKey, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^status\s+applied$`, r.stdout)
	require.Regexp(t, `(?m)^approval\s+approved, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval decided\s+\S+ by ines$`, r.stdout)
	require.Regexp(t, `(?m)^approval reason\s+booked by phone$`, r.stdout)

	r = cli(t, env, "deny", ap.OperationKey, "--tenant", "acme", "--reason", "changed my mind")
	requireOneLine(t, r, exitFailed, "is already approved by ines at ", "there is nothing to decide")
	r = cli(t, env, "approve", ap.OperationKey, "--tenant", "acme", "--episode", "1")
	requireOneLine(t, r, exitFailed, "is already approved by ines at ", "there is nothing to decide")
}

// deny rejects the call: it needs a reason, the workflow fails as rejected with the approval
// error type, nothing runs, and show says who denied it and why.
func TestDenyRejectsTheCall(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "")
	b := &bookings{}
	run := runBooking(t, c, approvalWorker(t, c, url, b, "default"))
	ap := waitingApproval(t, c, env)

	r := cli(t, env, "deny", ap.OperationKey)
	requireOneLine(t, r, exitUsage, "give --reason")

	// The tenant defaults to the namespace, as the interceptor's does.
	r = cli(t, env, "deny", ap.OperationKey, "--by", "ops", "--reason", "over the limit")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `the workflow answered: denied, by ops, at \S+Z, reason: over the limit`, r.stdout)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
	require.True(t, appErr.NonRetryable())
	effects, runs := b.counts()
	require.Zero(t, effects)
	require.Zero(t, runs, "nothing ran")

	r = cli(t, env, "show", ap.OperationKey)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^record\s+none: the call was refused and never ran$`, r.stdout)
	require.Regexp(t, `(?m)^approval\s+denied, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval decided\s+\S+ by ops$`, r.stdout)
	require.Regexp(t, `(?m)^approval reason\s+over the limit$`, r.stdout)
}

// With no worker running the approval workflow, approve delivers the approval and says so within
// ConfirmWait, update and signal together (exit 6, not 1: nothing was refused), naming the task
// queue a worker must run; show still says pending; once a worker runs there the approval lands
// and the call runs once.
func TestApproveWithoutAWorkerIsDelivered(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "")
	b := &bookings{}
	tq := "cli-approve-" + t.Name()
	w := newApprovalWorker(t, c, url, b, "acme", tq)
	require.NoError(t, w.Start())
	run := runBooking(t, c, tq)
	ap := waitingApproval(t, c, env)
	w.Stop()

	start := time.Now()
	r := cli(t, env, "approve", ap.OperationKey, "--tenant", "acme", "--by", "ines")
	took := time.Since(start)
	requireOneLine(t, r, exitUnconfirmed, "the approval was delivered to the approval workflow "+reconcile.ApprovalWorkflowID(ap.OperationKey)+", but it did not accept or refuse it within 10s: ",
		"task queue "+tq+" (the approval workflow's)", "it is taken once a worker runs the workflow, with no need to send it again",
		"(until then `oncekey show "+ap.OperationKey+" --tenant acme` says pending, with the approval on its way)")
	require.Less(t, took, reconcile.ConfirmWait+3*time.Second, "one budget for the update, the signal and the confirmation")
	r = cli(t, env, "show", ap.OperationKey, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval\s+pending, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval on its way\s+an approval by ines was delivered \d+s ago \(\S+Z\) and waits for a worker: it is taken once one runs task queue `+tq+`$`, r.stdout)
	var sv showView
	r = cli(t, env, "show", ap.OperationKey, "--tenant", "acme", "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sv))
	require.NotNil(t, sv.Approval.Delivered)
	require.Equal(t, reconcile.Approve, sv.Approval.Delivered.Decision)

	w = newApprovalWorker(t, c, url, b, "acme", tq)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	booked(t, run)
	effects, runs := b.counts()
	require.Equal(t, 1, effects, "the delivered approval landed: one booking")
	require.Equal(t, 1, runs)
	views := approvalsJSON(t, env, "--status", "approved")
	require.Len(t, views, 1)
	require.Equal(t, "ines", views[0].DecidedBy)
	r = cli(t, env, "show", ap.OperationKey, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "on its way", "taken")
}

var (
	csrfFieldRe      = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	requestIDFieldRe = regexp.MustCompile(`name="request_id" value="([^"]+)"`)
)

// The inbox's approval form approves through the approval workflow: the call runs once, and the
// approval records who was signed in.
func TestServeApprovesThroughTheInbox(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{}
	run := runBooking(t, c, approvalWorker(t, c, url, b, "acme"))
	ap := waitingApproval(t, c, env)
	base := startServe(t, env, "--listen", "127.0.0.1:0")

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	get := func(path string) string {
		res, err := hc.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		return string(body)
	}
	body := get("/")
	require.Contains(t, body, `id="queue-approvals"`)
	require.Contains(t, body, "book &#34;R1&#34;")
	body = get("/approval?" + neturl.Values{"tenant": {"acme"}, "key": {ap.OperationKey}}.Encode())
	require.Contains(t, body, `id="decide-form"`)
	csrf, reqID := csrfFieldRe.FindStringSubmatch(body), requestIDFieldRe.FindStringSubmatch(body)
	require.NotNil(t, csrf)
	require.NotNil(t, reqID)

	res, err := hc.PostForm(base+"/decide", neturl.Values{"csrf": {csrf[1]}, "request_id": {reqID[1]}, "tenant": {"acme"}, "key": {ap.OperationKey},
		"episode": {"1"}, "decision": {"approve"}, "reason": {"checked the booking"}})
	require.NoError(t, err)
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(out))
	require.Contains(t, string(out), "Accepted: approved")
	require.Contains(t, string(out), "by ines (oncekey-serve)")

	var booked Booking
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, run.Get(ctx, &booked))
	require.Equal(t, "BK-R1", booked.ID)
	effects, runs := b.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, runs)
	views := approvalsJSON(t, env, "--status", "approved")
	require.Len(t, views, 1)
	require.Equal(t, "ines (oncekey-serve)", views[0].DecidedBy)
	require.Equal(t, "checked the booking", views[0].Reason)
}

// docTemporalCommands returns the `temporal workflow …` commands docs/approvals.md shows, each as
// the words bash makes of it, continuation lines joined and comments dropped.
func docTemporalCommands(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "approvals.md"))
	require.NoError(t, err)
	cmds := map[string][]string{}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		if cur == "" && !strings.HasPrefix(line, "temporal workflow ") {
			continue
		}
		cur += strings.TrimSuffix(strings.TrimSpace(line), `\`) + " "
		if strings.HasSuffix(strings.TrimSpace(line), `\`) {
			continue
		}
		if i := strings.Index(cur, "   #"); i >= 0 {
			cur = cur[:i]
		}
		args := shelltest.Args(t, cur)
		cmds[strings.Join(args[:3], " ")] = args
		cur = ""
	}
	require.Len(t, cmds, 3, "the update, the signal and the query: %v", cmds)
	return cmds
}

// The Temporal CLI commands docs/approvals.md shows decide as it says: the update approves (and
// answers with the decision), the signal denies, the query says where the approval stands.
func TestTemporalCLIDecidesAsDocumented(t *testing.T) {
	needsServices(t)
	bin := testenv.TemporalBinary()
	if bin == "" {
		testenv.Missing(t, "the Temporal CLI (make temporal)")
	}
	c, url, env := workerEnv(t, "")
	cmds := docTemporalCommands(t)
	temporalCLI := func(doc, key string) string {
		t.Helper()
		args := append([]string{}, cmds[doc][1:]...)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "ok1_…", key)
		}
		args = append(args, "--address", env["TEMPORAL_ADDRESS"], "--namespace", "default")
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	b := &bookings{}
	tq := approvalWorker(t, c, url, b, "acme")
	first := runBooking(t, c, tq)
	ap := waitingApproval(t, c, env)

	require.Contains(t, temporalCLI("temporal workflow query", ap.OperationKey), "waiting_for_decision")
	out := temporalCLI("temporal workflow update", ap.OperationKey)
	require.Contains(t, out, "approved", "the update answers with the decision")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var booked Booking
	require.NoError(t, first.Get(ctx, &booked))
	effects, _ := b.counts()
	require.Equal(t, 1, effects)

	second, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "booking-2-" + t.Name(), TaskQueue: tq, WorkflowExecutionTimeout: 3 * time.Minute}, "Booking", "R2")
	require.NoError(t, err)
	ap2 := waitingApproval(t, c, env)
	require.NotEqual(t, ap.OperationKey, ap2.OperationKey)
	temporalCLI("temporal workflow signal", ap2.OperationKey)
	err = second.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
	effects, _ = b.counts()
	require.Equal(t, 1, effects, "the denied call did not run")

	views := approvalsJSON(t, env, "--status", "all")
	require.Len(t, views, 2)
	for _, v := range views {
		require.Equal(t, "ada", v.DecidedBy)
	}
}

// deny --request-changes tells the model what to change: --message is required with it and is
// plain text; approve --args is one JSON object; both refused before anything is sent (exit 2).
// Sent, the message is recorded apart from the reason, and show prints both.
func TestDenyWithAMessageForTheModel(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "")
	b := &bookings{}
	run := runBooking(t, c, approvalWorker(t, c, url, b, "default"))
	ap := waitingApproval(t, c, env)

	r := cli(t, env, "deny", ap.OperationKey, "--reason", "wrong ref", "--request-changes")
	requireOneLine(t, r, exitUsage, "give --message with --request-changes")
	r = cli(t, env, "deny", ap.OperationKey, "--reason", "wrong ref", "--message", "line\x1b[31m")
	requireOneLine(t, r, exitUsage, "--message ", "nothing was sent")
	r = cli(t, env, "approve", ap.OperationKey, "--args", `"R2"`)
	requireOneLine(t, r, exitUsage, "--args: ", "must be one JSON object")

	r = cli(t, env, "deny", ap.OperationKey, "--by", "ops", "--reason", "ref R1 is on the fraud list (ticket 991)", "--request-changes",
		"--message", "Use the booking reference from the confirmation e-mail.")
	require.Equal(t, 0, r.code, r.stderr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run.Get(ctx, nil)
	tr := oncekey.Label(nil, err)
	require.Equal(t, oncekey.NextFix, tr.NextAction)
	require.Equal(t, oncekey.ReasonChangesRequested, tr.Reason)
	require.Equal(t, "Use the booking reference from the confirmation e-mail.", tr.Message)
	effects, runs := b.counts()
	require.Zero(t, effects)
	require.Zero(t, runs, "nothing ran")

	r = cli(t, env, "show", ap.OperationKey)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval reason\s+ref R1 is on the fraud list \(ticket 991\)$`, r.stdout)
	require.Regexp(t, `(?m)^changes requested\s+yes`, r.stdout)
	require.Regexp(t, `(?m)^message for the model\s+Use the booking reference from the confirmation e-mail\.$`, r.stdout)
}
