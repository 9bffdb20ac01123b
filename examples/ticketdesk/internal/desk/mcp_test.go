package desk

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/mcptools"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
)

func startDirectory(t *testing.T, f downstream.Faults) (*downstream.Set, *DirectoryServer, *McpProxy) {
	t.Helper()
	services, err := downstream.Start(f, []Customer{{ID: "C-1", Name: "Ada", Email: "ada@example.com", RefundsAllowed: true}})
	require.NoError(t, err)
	t.Cleanup(services.Close)
	reg, err := NewTools(services, nil, false).Policies()
	require.NoError(t, err)
	dir, err := StartDirectoryServer(services.Directory.URL, downstream.NewClient(5*time.Second), reg)
	require.NoError(t, err)
	t.Cleanup(dir.Close)
	proxy := &McpProxy{Servers: map[string]string{ToolsetDirectory: dir.URL}}
	t.Cleanup(proxy.Close)
	return services, dir, proxy
}

func TestMcpLookupCustomer(t *testing.T) {
	services, _, proxy := startDirectory(t, downstream.NoFaults())
	ctx := context.Background()

	out, err := proxy.CallMcpTool(ctx, McpCall{Toolset: ToolsetDirectory, Tool: ToolLookupCustomer, Args: []byte(`{"customer_id":"C-1"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"C-1","name":"Ada","email":"ada@example.com","tier":"","refunds_allowed":true}`, string(out))
	require.Equal(t, 1, services.Directory.Ledger.Stats().Reads, "the MCP tool read the directory service")

	_, err = proxy.CallMcpTool(ctx, McpCall{Toolset: ToolsetDirectory, Tool: ToolLookupCustomer, Args: []byte(`{"customer_id":"C-404"}`)})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, ErrTypeUnknownCustomer, appErr.Type())
	require.True(t, appErr.NonRetryable(), "an unknown customer stays unknown")

	_, err = proxy.CallMcpTool(ctx, McpCall{Toolset: "nope", Tool: ToolLookupCustomer, Args: []byte(`{}`)})
	require.True(t, errors.As(err, &appErr))
	require.True(t, appErr.NonRetryable())
}

func TestMcpLookupFailureIsRetryable(t *testing.T) {
	f := downstream.DefaultFaults(1)
	// A customer whose first directory read fails (503) and whose second is served.
	id := ""
	for i := range 10000 {
		c := fmt.Sprintf("C-%d", i)
		if g := f.For(downstream.ServiceDirectory, c, 1); (g == downstream.FaultErrorBeforeCommit || g == downstream.FaultLostAfterCommit) &&
			f.For(downstream.ServiceDirectory, c, 2) == downstream.FaultNone {
			id = c
			break
		}
	}
	require.NotEmpty(t, id)
	services, err := downstream.Start(f, []Customer{{ID: id, Name: "Bo", Email: "bo@example.com"}})
	require.NoError(t, err)
	t.Cleanup(services.Close)
	reg, err := NewTools(services, nil, false).Policies()
	require.NoError(t, err)
	dir, err := StartDirectoryServer(services.Directory.URL, downstream.NewClient(5*time.Second), reg)
	require.NoError(t, err)
	t.Cleanup(dir.Close)
	proxy := &McpProxy{Servers: map[string]string{ToolsetDirectory: dir.URL}}
	t.Cleanup(proxy.Close)

	args := []byte(fmt.Sprintf(`{"customer_id":%q}`, id))
	_, err = proxy.CallMcpTool(context.Background(), McpCall{Toolset: ToolsetDirectory, Tool: ToolLookupCustomer, Args: args})
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "a directory outage is retried: %v", err)
	out, err := proxy.CallMcpTool(context.Background(), McpCall{Toolset: ToolsetDirectory, Tool: ToolLookupCustomer, Args: args})
	require.NoError(t, err)
	require.Contains(t, string(out), "bo@example.com")
}

// TestMcpAnnotationsFromPolicy lists the directory's tools as an MCP client sees them: the
// annotations and the effect class in _meta are the ones derived from lookup_customer's policy
// (ReadOnly), and the model is offered the same tool, with the input schema from its type.
func TestMcpAnnotationsFromPolicy(t *testing.T) {
	_, dir, _ := startDirectory(t, downstream.NoFaults())
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: dir.URL, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer s.Close()
	res, err := s.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, res.Tools, 1)
	tool := res.Tools[0]
	require.Equal(t, ToolLookupCustomer, tool.Name)
	require.NotNil(t, tool.Annotations)
	require.True(t, tool.Annotations.ReadOnlyHint)
	require.Equal(t, "read_only", tool.Meta[mcptools.MetaEffect])
	require.Contains(t, string(mustJSON(t, tool.InputSchema)), `"customer_id"`)

	reg, err := NewTools(&downstream.Set{}, nil, false).Policies()
	require.NoError(t, err)
	defs, err := ToolDefinitions(reg)
	require.NoError(t, err)
	require.Len(t, defs, len(ModelTools))
	b := string(mustJSON(t, defs))
	for _, name := range ModelTools {
		require.Contains(t, b, `"name":"`+name+`"`)
	}
	require.Contains(t, b, "calling it again is always safe", "lookup_customer's description says it only reads")
	require.Contains(t, b, "if it is unknown, do not repeat it", "the effectful tools' descriptions say what unknown means")

	// The route gives lookup_customer its own policy behind the proxy activity.
	res2, ok, err := reg.Resolve(ActivityCallMcpTool, []byte(`{"toolset":"directory","tool":"lookup_customer","args":{"customer_id":"C-1"}}`))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, ToolLookupCustomer, res2.Tool)
	require.False(t, res2.Fallback)
	require.JSONEq(t, `{"customer_id":"C-1"}`, string(res2.Args))
	other, _, err := reg.Resolve(ActivityCallMcpTool, []byte(`{"toolset":"directory","tool":"delete_customer","args":{}}`))
	require.NoError(t, err)
	require.True(t, other.Fallback, "a tool nobody classified gets the fallback")
	require.Equal(t, oncekey.Effectful, other.Policy.Effect)
}
