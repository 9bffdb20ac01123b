package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// ToolExecutorInput is the input of the one generic activity through which an agent loop in the
// shape of Temporal's Go agent-loop recipe runs every tool: the tool's name and the arguments the
// model wrote, as a generic map.
type ToolExecutorInput struct {
	ToolName  string                 `json:"tool_name"`
	Arguments map[string]interface{} `json:"arguments"`
}

// toolbox is the downstream of such an agent's tools: the services each tool calls, counting the
// requests each gets, apart from anything the executor reports.
type toolbox struct {
	mu       sync.Mutex
	requests map[string]int
}

func (b *toolbox) count(tool string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests[tool]++
	return b.requests[tool]
}

func (b *toolbox) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.requests {
		out[k] = v
	}
	return out
}

// ToolExecutor looks the tool up by name and calls its service, as the recipe's activity does.
func (b *toolbox) ToolExecutor(ctx context.Context, in ToolExecutorInput) (string, error) {
	switch in.ToolName {
	case "get_weather":
		b.count(in.ToolName)
		return fmt.Sprintf("sunny in %v", in.Arguments["city"]), nil
	case "create_ticket", "refund":
		n := b.count(in.ToolName)
		return fmt.Sprintf("%s %d: %v", in.ToolName, n, in.Arguments), nil
	}
	return "", fmt.Errorf("unknown tool %q", in.ToolName)
}

// ToolCallResult is what AgentToolsWorkflow saw of one tool call: the tool's result, or the error
// the loop would hand the model, with its application error type.
type ToolCallResult struct {
	Result       string
	Error        string
	ErrType      string
	NonRetryable bool
	// Detail is the operator's account in the failure's details (oncekey.Details.Message).
	Detail string
}

// AgentToolsWorkflow runs each tool call through the one ToolExecutor activity, with the
// recipe's activity options and no step IDs, and keeps going after a failed call, as the
// recipe's loop does.
func AgentToolsWorkflow(ctx workflow.Context, calls []ToolExecutorInput) ([]ToolCallResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	})
	out := make([]ToolCallResult, 0, len(calls))
	for _, call := range calls {
		var r ToolCallResult
		if err := workflow.ExecuteActivity(ctx, "ToolExecutor", call).Get(ctx, &r.Result); err != nil {
			r.Error = "Error executing tool: " + err.Error()
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) {
				r.ErrType, r.NonRetryable = ae.Type(), ae.NonRetryable()
			}
			if d, ok := oncekey.ErrorDetails(err); ok {
				r.Detail = d.Message
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// A Route whose paths are not the ToolExecutor input's JSON members (tool_name, arguments), as
// when the docs' MCP line (tool, args) is copied onto it, registered by name so that nothing
// checks it before the first call: every call fails with a non-retryable oncekey.Config error
// that names the path and the members the input has, before anything is claimed. No call is
// merged into another (each tool's service gets no request, rather than the first call's
// result standing in for the others), no tool silently falls back to Effectful, and the store
// holds no record. The Route with the right paths runs every call once.
func TestE2ERouteWithPathsThatDoNotResolve(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	weather := ToolExecutorInput{ToolName: "get_weather", Arguments: map[string]interface{}{"city": "Lyon"}}
	ticketA := ToolExecutorInput{ToolName: "create_ticket", Arguments: map[string]interface{}{"subject": "printer on fire"}}
	ticketB := ToolExecutorInput{ToolName: "create_ticket", Arguments: map[string]interface{}{"subject": "refund not received"}}
	refund := ToolExecutorInput{ToolName: "refund", Arguments: map[string]interface{}{"order": "o-1"}}
	calls := []ToolExecutorInput{weather, ticketA, ticketB, refund}
	for _, tc := range []struct {
		name  string
		route oncekey.Route
		// says is what the error names: the path, and the input's members.
		says []string
	}{
		{"both paths wrong", oncekey.Route{Tool: oncekey.ToolAt("tool"), Args: "args"},
			[]string{"Route.Tool", `"arguments", "tool_name"`}},
		{"args path wrong", oncekey.Route{Tool: oncekey.ToolAt("tool_name"), Args: "args"},
			[]string{`Route.Args path "args"`, `no member "args"`, `"arguments", "tool_name"`}},
		{"tool path wrong", oncekey.Route{Tool: oncekey.ToolAt("tool"), Args: "arguments"},
			[]string{"Route.Tool", `"arguments", "tool_name"`}},
		{"tool paths wrong", oncekey.Route{ToolPaths: []string{"tool"}, Args: "arguments"},
			[]string{`Route.ToolPaths path "tool"`, `no member "tool"`, `"arguments", "tool_name"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &toolbox{requests: map[string]int{}}
			reg := agentToolsRegistry(t)
			require.NoError(t, reg.Route("ToolExecutor", tc.route), "registered by name: the input type is unknown here")
			if len(tc.route.ToolPaths) > 0 {
				require.Error(t, reg.Route(b.ToolExecutor, tc.route), "given the activity's function, Route refuses the paths")
			}
			store, c := agentToolsWorker(t, reg, b)

			got := runAgentTools(t, c, calls)
			require.Len(t, got, len(calls))
			for i, r := range got {
				require.Empty(t, r.Result, "call %d", i)
				require.Equal(t, oncekey.ErrTypeConfig, r.ErrType, "call %d: %s", i, r.Error)
				require.True(t, r.NonRetryable, "call %d", i)
				for _, s := range tc.says {
					require.Contains(t, r.Detail, s, "call %d: the details name the path and the members", i)
					require.NotContains(t, r.Error, s, "call %d: what the model reads holds no operator detail", i)
				}
				require.Contains(t, r.Detail, "nothing was claimed")
			}
			require.Empty(t, b.counts(), "no tool's service got a request: no call ran, none answered for another")
			res, err := store.List(context.Background(), &oncekeystore.ListParams{})
			require.NoError(t, err)
			require.Empty(t, res.Records, "nothing was claimed")
		})
	}

	t.Run("paths that resolve", func(t *testing.T) {
		t.Parallel()
		b := &toolbox{requests: map[string]int{}}
		reg := agentToolsRegistry(t)
		require.NoError(t, reg.Route(b.ToolExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
		store, c := agentToolsWorker(t, reg, b)

		got := runAgentTools(t, c, calls)
		for i, r := range got {
			require.Empty(t, r.Error, "call %d", i)
		}
		require.Equal(t, "sunny in Lyon", got[0].Result)
		require.Equal(t, "create_ticket 1: map[subject:printer on fire]", got[1].Result)
		require.Equal(t, "create_ticket 2: map[subject:refund not received]", got[2].Result)
		require.Equal(t, "refund 1: map[order:o-1]", got[3].Result)
		require.Equal(t, map[string]int{"get_weather": 1, "create_ticket": 2, "refund": 1}, b.counts())
		res, err := store.List(context.Background(), &oncekeystore.ListParams{})
		require.NoError(t, err)
		tools := map[string]int{}
		for _, rec := range res.Records {
			require.Equal(t, oncekeystore.StatusApplied, rec.Status)
			tools[rec.Tool]++
		}
		require.Equal(t, map[string]int{"create_ticket": 2, "refund": 1}, tools,
			"one record per Effectful call; the ReadOnly weather call claims nothing")
	})
}

// agentToolsRegistry returns a Registry with the policies of the agent's tools, routed by
// ToolExecutor: the weather is ReadOnly, a ticket and a refund Effectful.
func agentToolsRegistry(t *testing.T) *oncekey.Registry {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, oncekey.SetTool[map[string]interface{}](reg, "get_weather", oncekey.Policy{Effect: oncekey.ReadOnly}))
	require.NoError(t, oncekey.SetTool[map[string]interface{}](reg, "create_ticket", oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, oncekey.SetTool[map[string]interface{}](reg, "refund", oncekey.Policy{Effect: oncekey.Effectful}))
	return reg
}

// agentToolsWorker starts a worker with the plugin (reg, Postgres as the store) running
// AgentToolsWorkflow and b's ToolExecutor on a task queue of the test's own.
// opts, when given, change the plugin's options.
func agentToolsWorker(t *testing.T, reg *oncekey.Registry, b *toolbox, opts ...func(*worker.Options)) (oncekeystore.Store, client.Client) {
	t.Helper()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	o := worker.Options{Store: store, Registry: reg}
	for _, f := range opts {
		f(&o)
	}
	plugin, err := worker.NewPlugin(o)
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{},
		Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := sdkworker.New(c, "oncekey-e2e-"+t.Name(), sdkworker.Options{})
	w.RegisterWorkflow(AgentToolsWorkflow)
	w.RegisterActivity(b.ToolExecutor)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return store, c
}

func runAgentTools(t *testing.T, c client.Client, calls []ToolExecutorInput) []ToolCallResult {
	t.Helper()
	ctx := testCtx(t)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "agent-tools-" + t.Name(), TaskQueue: "oncekey-e2e-" + t.Name()},
		AgentToolsWorkflow, calls)
	require.NoError(t, err)
	var got []ToolCallResult
	require.NoError(t, run.Get(ctx, &got))
	return got
}
