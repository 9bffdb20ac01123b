package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/mcptools"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
)

// ActivityCallMcpTool is the activity type of the MCP proxy: one activity for every tool an MCP
// server offers (CallMcpTool{Toolset, Tool, Args}, the shape of Temporal's own Go agent
// integration).
const ActivityCallMcpTool = "CallMcpTool"

// ToolsetDirectory names the customer directory's MCP server.
const ToolsetDirectory = "directory"

// ErrTypeUnknownCustomer is the application error type of a lookup for a customer the directory
// does not have.
const ErrTypeUnknownCustomer = "ticketdesk.UnknownCustomer"

// McpCall is the MCP proxy activity's argument: which server (Toolset), which of its tools, and
// the arguments as the model wrote them.
type McpCall struct {
	Toolset string          `json:"toolset"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
}

// LookupInput is lookup_customer's input.
type LookupInput struct {
	CustomerID string `json:"customer_id" jsonschema:"the customer's ID, e.g. C-1001"`
}

// unknownCustomerPrefix starts the error text of a lookup that found no customer.
const unknownCustomerPrefix = "unknown customer "

// DirectoryServer is the customer directory served over MCP (streamable HTTP on loopback). Its
// one tool, lookup_customer, reads the directory service and carries the annotations derived from
// its oncekey policy.
type DirectoryServer struct {
	// URL is the MCP endpoint ("http://127.0.0.1:41234/mcp").
	URL string
	srv *http.Server
}

// StartDirectoryServer serves lookup_customer on 127.0.0.1, reading the directory at directoryURL
// through client. The MCP tool (description, input schema, annotations and the effect class in
// _meta) comes from its definition in registry (adapters/mcptools). Close it when done.
func StartDirectoryServer(directoryURL string, client *downstream.Client, registry *oncekey.Registry) (*DirectoryServer, error) {
	defs, err := registry.Definitions(ToolLookupCustomer)
	if err != nil {
		return nil, fmt.Errorf("desk: MCP directory: %w", err)
	}
	tool, err := mcptools.Tool(defs[0])
	if err != nil {
		return nil, fmt.Errorf("desk: MCP directory: %w", err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "ticketdesk-directory", Version: "v1"}, nil)
	mcp.AddTool(s, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in LookupInput) (*mcp.CallToolResult, Customer, error) {
		var c Customer
		err := client.Get(ctx, directoryURL, "/customers/"+in.CustomerID, &c)
		if errors.Is(err, downstream.ErrNotFound) {
			return nil, c, errors.New(unknownCustomerPrefix + in.CustomerID)
		}
		return nil, c, err
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("desk: listen for the MCP directory: %w", err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	d := &DirectoryServer{URL: "http://" + ln.Addr().String() + "/mcp", srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// Close stops the server.
func (d *DirectoryServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
}

// McpProxy is the MCP proxy activity: it calls tools on the MCP servers it knows by toolset,
// over one client session per server, opened on first use and opened again after an error.
type McpProxy struct {
	// Servers maps a toolset to its MCP endpoint.
	Servers map[string]string
	// HTTPClient carries the calls. Defaults to a client with a 10 s timeout.
	HTTPClient *http.Client

	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
}

func (p *McpProxy) session(ctx context.Context, toolset string) (*mcp.ClientSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sessions[toolset]; ok {
		return s, nil
	}
	url, ok := p.Servers[toolset]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError("no MCP server for toolset "+toolset, "ticketdesk.UnknownToolset", nil)
	}
	hc := p.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "ticketdesk-worker", Version: "v1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to MCP toolset %s: %w", toolset, err)
	}
	if p.sessions == nil {
		p.sessions = map[string]*mcp.ClientSession{}
	}
	p.sessions[toolset] = s
	return s, nil
}

func (p *McpProxy) drop(toolset string, s *mcp.ClientSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[toolset] == s {
		delete(p.sessions, toolset)
		_ = s.Close()
	}
}

// Close closes the proxy's sessions.
func (p *McpProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.sessions {
		_ = s.Close()
		delete(p.sessions, k)
	}
}

// CallMcpTool calls in.Tool on the toolset's MCP server and returns its structured result. A
// tool error is an error: non-retryable for an unknown customer, retryable otherwise.
func (p *McpProxy) CallMcpTool(ctx context.Context, in McpCall) (json.RawMessage, error) {
	s, err := p.session(ctx, in.Toolset)
	if err != nil {
		return nil, err
	}
	var args map[string]any
	if err := json.Unmarshal(in.Args, &args); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("arguments of "+in.Tool+" are not a JSON object", "ticketdesk.BadArguments", err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: in.Tool, Arguments: args})
	if err != nil {
		p.drop(in.Toolset, s)
		return nil, fmt.Errorf("MCP %s/%s: %w", in.Toolset, in.Tool, err)
	}
	if res.IsError {
		text := contentText(res)
		if strings.HasPrefix(text, unknownCustomerPrefix) {
			return nil, temporal.NewNonRetryableApplicationError(text, ErrTypeUnknownCustomer, nil)
		}
		return nil, fmt.Errorf("MCP %s/%s: %s", in.Toolset, in.Tool, text)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}
