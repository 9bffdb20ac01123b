package main

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// ToolExecutorInput is the input of an agent loop's one tool activity: the tool's name and its
// arguments as the model gave them.
type ToolExecutorInput struct {
	ToolName  string                 `json:"tool_name"`
	Arguments map[string]interface{} `json:"arguments"`
}

// ticketDesk is the downstream of the routed tool: it counts its own effects.
type ticketDesk struct {
	mu            sync.Mutex
	effects, runs int
}

// ToolExecutor runs every tool of the loop and answers with a string. The first run opens the
// ticket and loses its answer, so its outcome is unknown.
func (d *ticketDesk) ToolExecutor(ctx context.Context, in ToolExecutorInput) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs++
	d.effects++
	if d.runs == 1 {
		return "", errors.New("read: connection reset by peer")
	}
	return "T-" + strconv.Itoa(d.effects), nil
}

func (d *ticketDesk) counts() (effects, runs int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects, d.runs
}

// agentTurn is one turn of the loop: it calls the tool the model chose through ToolExecutor,
// without a step ID, and returns what the model reads.
func agentTurn(ctx workflow.Context, subject string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, "ToolExecutor", ToolExecutorInput{ToolName: "open_ticket",
		Arguments: map[string]interface{}{"subject": subject}}).Get(ctx, &out)
	return out, err
}

var csrfInputRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// inboxResolve sends the inbox's resolve form for key (tenant acme, epoch 1) with result, as a
// browser would (the record page first, for its CSRF cookie and token), and returns the page it
// answers with, unescaped.
func inboxResolve(t *testing.T, base, key, result string) string {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	res, err := hc.Get(base + "/record?" + url.Values{"tenant": {"acme"}, "key": {key}}.Encode())
	require.NoError(t, err)
	page, err := io.ReadAll(res.Body)
	require.NoError(t, res.Body.Close())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(page))
	m := csrfInputRe.FindStringSubmatch(string(page))
	require.NotNil(t, m, "the record page carries the resolve form")
	res, err = hc.PostForm(base+"/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {"1"}, "outcome": {"applied"},
		"effect_reference": {"T-1"}, "result": {result}, "csrf": {m[1]}})
	require.NoError(t, err)
	page, err = io.ReadAll(res.Body)
	require.NoError(t, res.Body.Close())
	require.NoError(t, err)
	return html.UnescapeString(string(page))
}

// Issue 38.2. A routed tool (one ToolExecutor activity carrying every tool, its tools registered
// with SetTool[map[string]interface{}]) has the routed activity's result type, string. A
// resolution whose result is the service's JSON object is refused by every way of settling (the
// update, the signal, reconcile.Resolve, oncekey resolve, the inbox's form), each saying the type
// and an accepted example; the record stays unknown and the workflow keeps waiting. A string
// result then settles it and the workflow reads it, with the ticket opened once downstream.
func TestRoutedToolRefusesAResultOfTheWrongType(t *testing.T) {
	needsServices(t)
	c, dbURL, env := workerEnv(t, "ines")
	d := &ticketDesk{}
	s, _ := migratedAt(t, dbURL)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Route(d.ToolExecutor, oncekey.Route{Tool: oncekey.ToolAt("tool_name"), Args: "arguments"}))
	require.NoError(t, oncekey.SetTool[map[string]interface{}](reg, "open_ticket", oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: s, Registry: reg, Tenant: func(worker.TenantInfo) string { return "acme" },
		DataConverter: converter.GetDefaultDataConverter()})
	require.NoError(t, err)
	tq := "routed-result-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	w.RegisterWorkflowWithOptions(agentTurn, workflow.RegisterOptions{Name: "AgentTurn"})
	w.RegisterActivityWithOptions(d.ToolExecutor, activity.RegisterOptions{Name: "ToolExecutor"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "agent-" + t.Name(), TaskQueue: tq,
		WorkflowExecutionTimeout: 3 * time.Minute}, "AgentTurn", "printer on fire")
	require.NoError(t, err)
	key := waitingKey(t, c, env)
	id := reconcile.WorkflowID(key)
	ctx := context.Background()

	const wrong = `{"id":"T-1","status":"open"}`
	const want = `the result does not decode into open_ticket's result type string (json: cannot unmarshal object into Go value of type string); give JSON of that type, e.g. "text"`
	resolution := reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, EffectReference: "T-1", Result: json.RawMessage(wrong), ResolvedBy: "ines", Tenant: "acme"}
	unchanged := func(path string) {
		t.Helper()
		v := showJSON(t, env, key, "acme")
		require.Equal(t, oncekeystore.StatusUnknown, v.Status, "%s: the refused resolution changed nothing", path)
		require.Empty(t, v.ResolvedBy, path)
		st, err := reconcile.Status(ctx, c, key)
		require.NoError(t, err)
		require.Equal(t, reconcile.StateWaiting, st.State, "%s: the workflow still waits", path)
		effects, runs := d.counts()
		require.Equal(t, 1, effects, path)
		require.Equal(t, 1, runs, path)
	}

	// The update, as the Temporal CLI or UI sends it.
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: reconcile.UpdateName, UpdateID: "wrong-update",
		Args: []any{resolution}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, h.Get(ctx, nil), &appErr)
	require.Equal(t, reconcile.ErrTypeRefused, appErr.Type())
	require.Contains(t, appErr.Error(), want)
	unchanged("update")

	// The signal: refused in the status query.
	require.NoError(t, c.SignalWorkflow(ctx, id, "", reconcile.SignalName, resolution))
	require.Eventually(t, func() bool {
		st, err := reconcile.Status(ctx, c, key)
		return err == nil && st.InvalidSignals == 1 && st.State == reconcile.StateWaiting
	}, time.Minute, 100*time.Millisecond)
	st, err := reconcile.Status(ctx, c, key)
	require.NoError(t, err)
	require.Contains(t, st.LastInvalidSignal, want)
	unchanged("signal")

	// reconcile.Resolve.
	var refused *reconcile.RefusedError
	require.ErrorAs(t, reconcile.Resolve(ctx, c, "acme", key, resolution), &refused)
	require.Contains(t, refused.Reason, want)
	unchanged("reconcile.Resolve")

	// oncekey resolve.
	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--applied", "--ref", "T-1", "--result", wrong)
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stderr, want)
	unchanged("oncekey resolve")

	// The inbox's form.
	base := startServe(t, env)
	page := inboxResolve(t, base, key, wrong)
	require.Contains(t, page, "Refused by the reconciliation workflow")
	require.Contains(t, page, want)
	unchanged("inbox")

	// A string settles it, and the workflow (the model) reads it.
	page = inboxResolve(t, base, key, `"T-1"`)
	require.Contains(t, page, "Accepted: recorded as applied")
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got string
	require.NoError(t, run.Get(ctx2, &got))
	require.Equal(t, "T-1", got)
	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusApplied, v.Status)
	effects, runs := d.counts()
	require.Equal(t, 1, effects, "the ticket was opened once")
	require.Equal(t, 1, runs, "the tool did not run again")
	require.True(t, strings.HasPrefix(key, "ok1_"))
}
