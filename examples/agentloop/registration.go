package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// This file is all the oncekey the agent has: the workflow, the activities and the tools are
// unchanged. A Route tells the tools behind ToolExecutor apart, each tool gets a policy, and the
// plugin goes on the worker.

// NewRegistry returns the policies of the tools. lookup is the services' base URL, for the
// receipt lookups of the Effectful tools.
func NewRegistry(lookup string, hc *http.Client) (*oncekey.Registry, error) {
	reg := oncekey.NewRegistry()
	// ToolExecutorInput's JSON members: the tool's name at "tool_name", its arguments at
	// "arguments". Given the activity's function, Route checks both paths against its input type
	// now, so a wrong path fails here rather than at the first call.
	err := reg.Route((*Activities)(nil).ToolExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"})
	if err == nil {
		err = oncekey.SetTool[map[string]any](reg, ToolWeather, oncekey.Policy{Effect: oncekey.ReadOnly})
	}
	if err == nil {
		err = oncekey.SetTool[map[string]any](reg, ToolTicket, oncekey.Policy{Effect: oncekey.Effectful,
			Reconcile: receiptLookup(hc, lookup+"/tickets/by-key/")})
	}
	if err == nil {
		// One refund per order, whichever conversation asks: the key is the order, and the
		// model's wording of the reason does not make another refund.
		err = oncekey.SetTool[map[string]any](reg, ToolRefund, oncekey.Policy{Effect: oncekey.Effectful,
			Key:       oncekey.ExplicitKey(orderKey),
			Exclude:   []string{"reason"},
			Reconcile: receiptLookup(hc, lookup+"/refunds/by-key/")})
	}
	return reg, err
}

// orderKey keys a refund by the order_id member of its arguments (op.ArgsJSON is the part at
// the Route's Args). A refund without an order is refused, never keyed: one key for every such
// call would merge them.
func orderKey(op oncekey.Operation) (string, error) {
	var args struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(op.ArgsJSON, &args); err != nil {
		return "", err
	}
	if strings.TrimSpace(args.OrderID) == "" {
		return "", errors.New("a refund needs an order_id")
	}
	return "order:" + args.OrderID, nil
}

// NewPlugin returns the oncekey plugin for the worker: the interceptor with store and reg, the
// reconciliation workflow and its activities.
func NewPlugin(store *pgstore.Store, reg *oncekey.Registry) (*temporal.SimplePlugin, error) {
	return okworker.NewPlugin(okworker.Options{
		Store:    store,
		Registry: reg,
		// The plugin goes on the worker, where it cannot see the client's data converter: name it.
		DataConverter: converter.GetDefaultDataConverter(),
	})
}

// OperationKeyHeader carries the operation key of a claimed call to the services, which file
// what they did under it for the receipt lookups. It is not Idempotency-Key on purpose: Go's
// net/http takes that header as a promise that the server deduplicates, and sends a POST that
// carries it again by itself when a kept-alive connection closes before the answer; these
// services do not deduplicate, so that would be a second ticket nobody sees.
const OperationKeyHeader = "Operation-Key"

// NewHTTPClient returns the tools' HTTP client. A request made in the body of a claimed call
// carries the call's operation key in OperationKeyHeader; on plain Temporal there is none.
func NewHTTPClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: keyTransport{}}
}

type keyTransport struct{}

func (keyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if key, ok := oncekey.OperationKey(req.Context()); ok && key != "" {
		req = req.Clone(req.Context())
		req.Header.Set(OperationKeyHeader, key)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// receiptLookup asks the service at prefix+<operation key> for the answer of the request made
// under the key (OperationKeyHeader): the answer proves the effect landed and is the tool's
// result; a 404 proves it did not.
func receiptLookup(hc *http.Client, prefix string) func(context.Context, oncekey.ReconcileRequest) (oncekey.Receipt, error) {
	return func(ctx context.Context, req oncekey.ReconcileRequest) (oncekey.Receipt, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, prefix+url.PathEscape(req.OperationKey), nil)
		if err != nil {
			return oncekey.Receipt{}, err
		}
		resp, err := hc.Do(r)
		if err != nil {
			return oncekey.Receipt{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return oncekey.Receipt{}, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			var ref struct{ ID string }
			if err := json.Unmarshal(body, &ref); err != nil {
				return oncekey.Receipt{}, fmt.Errorf("receipt lookup: %w", err)
			}
			return oncekey.Receipt{Outcome: oncekey.ReceiptApplied, EffectReference: ref.ID, Result: strings.TrimSpace(string(body))}, nil
		case http.StatusNotFound:
			return oncekey.Receipt{Outcome: oncekey.ReceiptNotApplied, Note: "the service took no request under this key"}, nil
		}
		return oncekey.Receipt{}, errors.New("receipt lookup: " + resp.Status)
	}
}
