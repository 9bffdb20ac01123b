package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// shop is the fake downstream of the model-text tests: each tool counts the effects it really
// made, apart from anything oncekey reports.
type shop struct {
	mu      sync.Mutex
	effects map[string]int
	bodies  map[string]int
	// gate holds HoldOrder's body until it is closed.
	gate chan struct{}
}

func newShop() *shop {
	return &shop{effects: map[string]int{}, bodies: map[string]int{}, gate: make(chan struct{})}
}

// ShopArgs are the arguments of every shop tool, as a model gives them.
type ShopArgs struct {
	OrderID string `json:"order_id,omitempty"`
	Amount  int    `json:"amount,omitempty"`
	Subject string `json:"subject,omitempty"`
}

func (s *shop) body(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies[tool]++
}

func (s *shop) effect(tool string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.effects[tool]++
	return fmt.Sprintf("%s-%d", tool, s.effects[tool])
}

func (s *shop) count(tool string) (effects, bodies int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[tool], s.bodies[tool]
}

// lostAnswer is what a tool says when the downstream acted and its answer was lost: an operator's
// kind of text (a host and port) that oncekey must not hand on as its own.
const lostAnswer = "read tcp 10.20.30.40:443: connection reset by peer"

// OpenTicket and BookCourier act, then lose their answer: an unknown outcome.
func (s *shop) OpenTicket(ctx context.Context, in ShopArgs) (string, error) {
	s.body("OpenTicket")
	s.effect("OpenTicket")
	return "", errors.New(lostAnswer)
}

func (s *shop) BookCourier(ctx context.Context, in ShopArgs) (string, error) {
	s.body("BookCourier")
	s.effect("BookCourier")
	return "", errors.New(lostAnswer)
}

// RefundOrder and CancelOrder act once per order (ArgsKey "order_id").
func (s *shop) RefundOrder(ctx context.Context, in ShopArgs) (string, error) {
	s.body("RefundOrder")
	return s.effect("RefundOrder"), nil
}

func (s *shop) CancelOrder(ctx context.Context, in ShopArgs) (string, error) {
	s.body("CancelOrder")
	return s.effect("CancelOrder"), nil
}

// ChargeCard is refused every time before anything is done.
func (s *shop) ChargeCard(ctx context.Context, in ShopArgs) (string, error) {
	s.body("ChargeCard")
	return "", oncekey.NotApplied(errors.New("card service busy"))
}

// SendNotice, ExportReport (both need approval), DeleteAccount (never authorised), ArchiveCase
// (needs a step ID) and LookupStock (its claims fail) act when they run.
func (s *shop) SendNotice(ctx context.Context, in ShopArgs) (string, error) {
	s.body("SendNotice")
	return s.effect("SendNotice"), nil
}

func (s *shop) ExportReport(ctx context.Context, in ShopArgs) (string, error) {
	s.body("ExportReport")
	return s.effect("ExportReport"), nil
}

func (s *shop) DeleteAccount(ctx context.Context, in ShopArgs) (string, error) {
	s.body("DeleteAccount")
	return s.effect("DeleteAccount"), nil
}

func (s *shop) ArchiveCase(ctx context.Context, in ShopArgs) (string, error) {
	s.body("ArchiveCase")
	return s.effect("ArchiveCase"), nil
}

func (s *shop) LookupStock(ctx context.Context, in ShopArgs) (string, error) {
	s.body("LookupStock")
	return s.effect("LookupStock"), nil
}

// HoldOrder acts once the gate opens; ShipOrder acts at once. Both are keyed by the order alone.
func (s *shop) HoldOrder(ctx context.Context, in ShopArgs) (string, error) {
	s.body("HoldOrder")
	select {
	case <-s.gate:
	case <-ctx.Done():
		return "", oncekey.NotApplied(ctx.Err())
	}
	return s.effect("HoldOrder"), nil
}

func (s *shop) ShipOrder(ctx context.Context, in ShopArgs) (string, error) {
	s.body("ShipOrder")
	return s.effect("ShipOrder"), nil
}

// byOrderID keys a call by its order alone (oncekey.ExplicitKey), across workflows.
var byOrderID = oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
	var a ShopArgs
	if err := json.Unmarshal(op.ArgsJSON, &a); err != nil {
		return "", err
	}
	return a.OrderID, nil
})

// AwaitSignature hands its result to a completion from outside the worker, which oncekey refuses
// for a Transactional tool (its writes cannot wait outside the transaction).
func (s *shop) AwaitSignature(ctx context.Context, in ShopArgs) (string, error) {
	s.body("AwaitSignature")
	return "", activity.ErrResultPending
}

// LoopCall is one tool call a model proposed.
type LoopCall struct {
	Tool string   `json:"tool"`
	Args ShopArgs `json:"args"`
}

// LoopAnswer is what the loop made of one call: the tool's result, or the error's text the model
// reads ("Error executing tool: " and err.Error()), with the application error's own message and
// type.
type LoopAnswer struct {
	Result  string `json:"result,omitempty"`
	Model   string `json:"model,omitempty"`
	Message string `json:"message,omitempty"`
	Type    string `json:"type,omitempty"`
	// Detail is the operator's account of the error (oncekey.Details.Message).
	Detail string `json:"detail,omitempty"`
}

// ModelLoopWorkflow runs the calls one after another the way Temporal's AI cookbook agent does:
// no step IDs, 30 s start-to-close, retries from 1 s with backoff 2 and 3 attempts, and a failed
// call's err.Error() handed to the model as "Error executing tool: …".
func ModelLoopWorkflow(ctx workflow.Context, calls []LoopCall) ([]LoopAnswer, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	})
	out := make([]LoopAnswer, 0, len(calls))
	for _, c := range calls {
		var a LoopAnswer
		if err := workflow.ExecuteActivity(ctx, c.Tool, c.Args).Get(ctx, &a.Result); err != nil {
			a.Model = "Error executing tool: " + err.Error()
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) {
				a.Message, a.Type = appErr.Message(), appErr.Type()
			}
			if d, ok := oncekey.ErrorDetails(err); ok {
				a.Detail = d.Message
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// unclaimable fails every claim of the tool LookupStock as an unreachable store would.
type unclaimable struct{ *pgstore.Store }

func (u unclaimable) Claim(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
	if p.Tool == "LookupStock" {
		return nil, errors.New("dial tcp 10.20.30.40:5432: connect: connection refused")
	}
	return u.Store.Claim(ctx, p)
}

// modelTextEnv is a worker on the dev server with the shop's tools, its store in a schema of its
// own named in pgstore.Options.Schema (as the interceptor then names it in operator messages).
type modelTextEnv struct {
	c      client.Client
	store  *pgstore.Store
	schema string
	tq     string
	shop   *shop
}

func setupModelText(t *testing.T, escalation time.Duration) *modelTextEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	url, schema := testenv.PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgstore.MigrateSchema(context.Background(), pool, schema))
	e := &modelTextEnv{store: pgstore.New(pool, &pgstore.Options{Schema: schema}), schema: schema, shop: newShop()}
	s := e.shop
	effectful := oncekey.Policy{Effect: oncekey.Effectful}
	byOrder := oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("order_id")}
	once := byOrder
	once.OnHit = oncekey.OnHitFailFast
	ask := func(timeout time.Duration) oncekey.Policy {
		return oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Timeout: timeout}}
	}
	never := oncekey.Policy{Effect: oncekey.Effectful, Authorize: func(context.Context, oncekey.Operation) error {
		return fmt.Errorf("tenant acme may not delete accounts (policy table %s.grants)", schema)
	}}
	reg := oncekey.NewRegistry()
	for _, r := range []struct {
		fn any
		p  oncekey.Policy
	}{
		{s.OpenTicket, effectful}, {s.BookCourier, effectful}, {s.RefundOrder, byOrder}, {s.CancelOrder, once},
		{s.ChargeCard, effectful}, {s.SendNotice, ask(0)}, {s.ExportReport, ask(2 * time.Second)}, {s.DeleteAccount, never},
		{s.ArchiveCase, oncekey.Policy{Effect: oncekey.Effectful, RequireStepID: true}}, {s.LookupStock, effectful},
		{s.AwaitSignature, oncekey.Policy{Effect: oncekey.Transactional}},
		{s.HoldOrder, oncekey.Policy{Effect: oncekey.Effectful, Key: byOrderID, Lease: 3 * time.Second, WaitInFlight: -1}},
		{s.ShipOrder, oncekey.Policy{Effect: oncekey.Effectful, Key: byOrderID, Lease: time.Second, Retention: 2 * time.Second}},
	} {
		require.NoError(t, reg.Set(r.fn, r.p))
	}
	plugin, err := worker.NewPlugin(worker.Options{Store: unclaimable{e.store}, Registry: reg, EscalationTimeout: escalation})
	require.NoError(t, err)
	e.c, err = client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{},
		Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(e.c.Close)
	e.tq = "oncekey-modeltext-" + t.Name()
	w := sdkworker.New(e.c, e.tq, sdkworker.Options{})
	w.RegisterWorkflow(ModelLoopWorkflow)
	for _, fn := range []any{s.OpenTicket, s.BookCourier, s.RefundOrder, s.CancelOrder, s.ChargeCard, s.SendNotice,
		s.ExportReport, s.DeleteAccount, s.ArchiveCase, s.LookupStock, s.AwaitSignature, s.HoldOrder, s.ShipOrder} {
		w.RegisterActivity(fn)
	}
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return e
}

func (e *modelTextEnv) start(t *testing.T, id string, calls ...LoopCall) client.WorkflowRun {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: e.tq, WorkflowExecutionTimeout: 2 * time.Minute,
	}, ModelLoopWorkflow, calls)
	require.NoError(t, err)
	return run
}

func answers(t *testing.T, run client.WorkflowRun) []LoopAnswer {
	t.Helper()
	var out []LoopAnswer
	require.NoError(t, run.Get(testCtx(t), &out))
	return out
}

// unknownOf waits until the tool's outcome is unknown and its reconciliation waits for a person,
// and returns the record.
func (e *modelTextEnv) unknownOf(t *testing.T, tool string) *oncekeystore.Record {
	t.Helper()
	var rec *oncekeystore.Record
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), e.store, oncekeystore.ListParams{})
		if err != nil {
			return false
		}
		for _, r := range res.Records {
			if r.Tool == tool {
				st, err := reconcile.Status(context.Background(), e.c, r.OperationKey)
				rec = r
				return err == nil && st.State == reconcile.StateWaiting
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no reconciliation of %s came to wait for a person", tool)
	return rec
}

// pendingOf waits until the tool's approval is pending and its workflow waits for a decision.
func (e *modelTextEnv) pendingOf(t *testing.T, tool string) *oncekeystore.Approval {
	t.Helper()
	var a *oncekeystore.Approval
	require.Eventually(t, func() bool {
		res, err := e.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		if err != nil {
			return false
		}
		for _, ap := range res.Approvals {
			if ap.Tool == tool {
				rep, err := reconcile.QueryApproval(context.Background(), e.c, ap.OperationKey)
				a = ap
				return err == nil && rep.State == reconcile.ApprovalStateWaiting
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no approval of %s came to wait for a person", tool)
	return a
}

// activityPrefix matches the part of a Temporal ActivityError's text that varies by run (event
// IDs, the worker's identity).
var activityPrefix = regexp.MustCompile(`scheduledEventID: \d+, startedEventID: \d+, identity: [^)]*\)`)

// modelSaw is what the model read for the call, with the ActivityError's event IDs and worker
// identity replaced by "…".
func modelSaw(a LoopAnswer) string {
	return activityPrefix.ReplaceAllString(a.Model, "scheduledEventID: …, startedEventID: …, identity: …)")
}

// maxModelErrorBytes bounds what the model reads of any oncekey error, the ActivityError's text
// (tool name, event IDs, identity) and the loop's "Error executing tool: " included, when no
// reviewer's message comes with it.
const maxModelErrorBytes = 600

// assertFitForModel checks what the model read of an oncekey error: its bytes pinned (want, with
// the ActivityError's varying part as "…"), the application error's message is its text for a
// model within oncekey.MaxErrorTextBytes, and nothing an operator needs is in it: no schema,
// workflow or run ID, operation key, command or flag.
func (e *modelTextEnv) assertFitForModel(t *testing.T, name string, a LoopAnswer, run client.WorkflowRun, wantType, want string) {
	t.Helper()
	require.NotEmpty(t, a.Model, "%s: the call failed", name)
	require.Equal(t, wantType, a.Type, "%s: %s", name, a.Model)
	require.Equal(t, want, modelSaw(a), "%s: the bytes the model reads", name)
	require.LessOrEqual(t, len(a.Message), oncekey.MaxErrorTextBytes, name)
	limit := maxModelErrorBytes
	if strings.Contains(a.Message, "Reviewer's message: ") {
		limit += oncekeystore.MaxModelMessageBytes
	}
	require.LessOrEqual(t, len(a.Model), limit, "%s: %s", name, a.Model)
	for _, leak := range []string{e.schema, run.GetID(), run.GetRunID(), "oncekey ", " --", "ok1_", "10.20.30.40", "alice", "ops ticket"} {
		require.NotContains(t, a.Model, leak, "%s: operator detail in what the model reads", name)
	}
}

// Every outcome a loop shaped like Temporal's AI cookbook agent can see (it hands err.Error() of
// a failed call to its model) reads as the text for a model of its outcome, pinned here byte for
// byte: what happened and what to do, with no schema, workflow or run ID, operation key, command
// or flag; the operator's account is in the error's details. Effects are counted downstream.
func TestE2EModelReadsErrorTexts(t *testing.T) {
	t.Parallel()
	e := setupModelText(t, 0)
	act := func(tool, text, typ string, retryable bool) string {
		return fmt.Sprintf("Error executing tool: activity error (type: %s, scheduledEventID: …, startedEventID: …, identity: …): %s (type: %s, retryable: %v)",
			tool, text, typ, retryable)
	}
	wf := func(text, typ string) string {
		return fmt.Sprintf("Error executing tool: %s (type: %s, retryable: false)", text, typ)
	}
	failedStop := "Failed: the call did not succeed, and repeating it as it is will not help. Do not retry it; tell the user it failed."

	// Runs that need a person start first, so that the rest runs while they wait.
	decided := e.start(t, "modeltext-decided-failed", LoopCall{Tool: "BookCourier", Args: ShopArgs{Subject: "pick up"}})
	denied := e.start(t, "modeltext-denied", LoopCall{Tool: "SendNotice", Args: ShopArgs{Subject: "late delivery"}})
	timedOut := e.start(t, "modeltext-approval-timed-out", LoopCall{Tool: "ExportReport", Args: ShopArgs{Subject: "all orders"}})
	rest := e.start(t, "modeltext-rest",
		LoopCall{Tool: "RefundOrder", Args: ShopArgs{OrderID: "A-1", Amount: 10}},
		LoopCall{Tool: "RefundOrder", Args: ShopArgs{OrderID: "A-1", Amount: 20}},
		LoopCall{Tool: "CancelOrder", Args: ShopArgs{OrderID: "A-2"}},
		LoopCall{Tool: "CancelOrder", Args: ShopArgs{OrderID: "A-2"}},
		LoopCall{Tool: "ChargeCard", Args: ShopArgs{OrderID: "A-3", Amount: 5}},
		LoopCall{Tool: "DeleteAccount", Args: ShopArgs{Subject: "acme"}},
		LoopCall{Tool: "ArchiveCase", Args: ShopArgs{Subject: "case 7"}},
		LoopCall{Tool: "LookupStock", Args: ShopArgs{Subject: "printer"}},
		LoopCall{Tool: "AwaitSignature", Args: ShopArgs{Subject: "contract"}},
	)

	rec := e.unknownOf(t, "BookCourier")
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, rec.Tenant, rec.OperationKey, reconcile.Resolution{
		Outcome: reconcile.Failed, Epoch: rec.Epoch, ResolvedBy: "alice",
		Note: fmt.Sprintf("courier refused, see ops ticket 42 in schema %s", e.schema),
	}))
	ap := e.pendingOf(t, "SendNotice")
	_, err := reconcile.Decide(context.Background(), e.c, ap.OperationKey, reconcile.Decision{
		Decision: reconcile.Deny, Tenant: ap.Tenant, DecidedBy: "alice",
		Reason:  fmt.Sprintf("ops ticket 43: customer opted out (schema %s)", e.schema),
		Message: "The customer asked not to be contacted; do not send notices.",
	})
	require.NoError(t, err)

	out := answers(t, decided)
	e.assertFitForModel(t, "decided failed", out[0], decided, oncekey.ErrTypeFailed, wf(failedStop, oncekey.ErrTypeFailed))
	effects, _ := e.shop.count("BookCourier")
	require.Equal(t, 1, effects, "decided failed: the one effect, never repeated")

	out = answers(t, denied)
	e.assertFitForModel(t, "approval denied", out[0], denied, oncekey.ErrTypeApproval, wf("Declined: a person reviewed this call and did not approve it. "+
		"Nothing was done. Do not call it again for the same purpose or try another way to do it; tell the user it was declined. "+
		"Reviewer's message: The customer asked not to be contacted; do not send notices.", oncekey.ErrTypeApproval))
	effects, bodies := e.shop.count("SendNotice")
	require.Zero(t, effects+bodies, "approval denied: nothing ran")

	out = answers(t, timedOut)
	e.assertFitForModel(t, "approval timed out", out[0], timedOut, oncekey.ErrTypeApproval, wf("Not approved: this call needs a person's approval, "+
		"and it was not given in time. Nothing was done. Do not retry it as it is; ask the user how to proceed.", oncekey.ErrTypeApproval))
	effects, bodies = e.shop.count("ExportReport")
	require.Zero(t, effects+bodies, "approval timed out: nothing ran")

	out = answers(t, rest)
	require.Len(t, out, 9)
	require.Empty(t, out[0].Model, "the first refund ran")
	e.assertFitForModel(t, "fingerprint mismatch", out[1], rest, oncekey.ErrTypeFingerprintMismatch, act("RefundOrder",
		"Conflict: this operation was made before with different arguments, so nothing was done. To get its result, call again "+
			"with the earlier arguments; if you mean a separate new action, ask the user first.", oncekey.ErrTypeFingerprintMismatch, false))
	effects, _ = e.shop.count("RefundOrder")
	require.Equal(t, 1, effects, "fingerprint mismatch: one refund")

	require.Empty(t, out[2].Model, "the first cancellation ran")
	e.assertFitForModel(t, "repeat refused", out[3], rest, oncekey.ErrTypeRepeatRefused, act("CancelOrder",
		"Refused: this exact action was already done once, and this tool must not be repeated, so nothing was done now. "+
			"Do not call it again; tell the user it had already been done.", oncekey.ErrTypeRepeatRefused, false))
	effects, _ = e.shop.count("CancelOrder")
	require.Equal(t, 1, effects, "repeat refused: one cancellation")

	// The tool's own words (a NotApplied refusal's) follow oncekey's text, as without oncekey.
	e.assertFitForModel(t, "not applied after the last attempt", out[4], rest, oncekey.ErrTypeNotApplied, act("ChargeCard",
		"Not done: a temporary problem stopped the call before it took effect. It is safe to make the same call again later.",
		oncekey.ErrTypeNotApplied, true)+": card service busy")
	effects, bodies = e.shop.count("ChargeCard")
	require.Equal(t, 0, effects, "not applied: no charge")
	require.Equal(t, 3, bodies, "not applied: each of the 3 attempts ran")

	e.assertFitForModel(t, "not authorized", out[5], rest, oncekey.ErrTypeUnauthorized, act("DeleteAccount",
		"Not allowed: this call is not permitted with these arguments. Nothing was done. Do not retry it or try another way "+
			"to do it; tell the user it is not allowed.", oncekey.ErrTypeUnauthorized, false))
	effects, bodies = e.shop.count("DeleteAccount")
	require.Zero(t, effects+bodies, "not authorized: nothing ran")

	e.assertFitForModel(t, "configuration error", out[6], rest, oncekey.ErrTypeConfig, wf(failedStop, oncekey.ErrTypeConfig))
	effects, bodies = e.shop.count("ArchiveCase")
	require.Zero(t, effects+bodies, "configuration error: nothing ran")

	e.assertFitForModel(t, "store unavailable", out[7], rest, oncekey.ErrTypeStoreUnavailable, act("LookupStock",
		"Not done: a temporary problem stopped the call before it took effect. It is safe to make the same call again later.",
		oncekey.ErrTypeStoreUnavailable, true))
	effects, bodies = e.shop.count("LookupStock")
	require.Zero(t, effects+bodies, "store unavailable: nothing ran")

	e.assertFitForModel(t, "asynchronous completion refused", out[8], rest, oncekey.ErrTypeAsyncCompletion, act("AwaitSignature",
		failedStop, oncekey.ErrTypeAsyncCompletion, false))
	_, bodies = e.shop.count("AwaitSignature")
	require.Equal(t, 1, bodies, "asynchronous completion: the body ran once")
}

// An unknown outcome nobody decides within the escalation timeout reaches the loop as the text for
// a model of an unknown outcome, with none of the operator's account (the `oncekey resolve
// --direct --schema …` command, the schema, the workflow and run IDs): that is in the error's
// details, and the record stays unknown for the CLI and the inbox.
func TestE2EModelReadsUnknownAfterEscalation(t *testing.T) {
	t.Parallel()
	e := setupModelText(t, 2*time.Second)
	run := e.start(t, "modeltext-unknown", LoopCall{Tool: "OpenTicket", Args: ShopArgs{Subject: "printer on fire"}})
	var out []LoopAnswer
	require.NoError(t, run.Get(testCtx(t), &out))
	e.assertFitForModel(t, "unknown after the escalation timeout", out[0], run, oncekey.ErrTypeIndeterminate,
		"Error executing tool: Outcome unknown: the action may or may not have happened, and which is not known yet. Do not repeat "+
			"it and do not try another way to do the same thing; tell the user its outcome is not confirmed and must be checked. "+
			"(type: oncekey.IndeterminateOutcome, retryable: false)")
	effects, bodies := e.shop.count("OpenTicket")
	require.Equal(t, 1, effects, "one ticket, never a second")
	require.Equal(t, 1, bodies)

	// The operator's account travels in the details: the command that settles it, with the schema.
	res, err := reconcile.List(context.Background(), e.store, oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusUnknown, res.Records[0].Status)
	require.Contains(t, out[0].Detail, "oncekey resolve "+res.Records[0].OperationKey+" --direct --schema "+e.schema)
	require.Contains(t, out[0].Detail, "within the escalation timeout of 2s")
}

// detail is the operator's account of an oncekey error (oncekey.Details.Message): the error's
// own message is the text for a model.
func detail(err error) string {
	d, _ := oncekey.ErrorDetails(err)
	return d.Message
}

// A call that finds its operation running in another workflow, and one whose operation is past
// retention (a tombstone), read the texts for a model of in_flight and expired: nothing ran for
// them, and the one effect is the first call's.
func TestE2EModelReadsInFlightAndExpired(t *testing.T) {
	t.Parallel()
	e := setupModelText(t, 0)
	act := func(tool, text, typ string, retryable bool) string {
		return fmt.Sprintf("Error executing tool: activity error (type: %s, scheduledEventID: …, startedEventID: …, identity: …): %s (type: %s, retryable: %v)",
			tool, text, typ, retryable)
	}

	holder := e.start(t, "modeltext-holder", LoopCall{Tool: "HoldOrder", Args: ShopArgs{OrderID: "H-1"}})
	require.Eventually(t, func() bool { _, bodies := e.shop.count("HoldOrder"); return bodies == 1 }, 30*time.Second, 50*time.Millisecond)
	waiter := e.start(t, "modeltext-in-flight", LoopCall{Tool: "HoldOrder", Args: ShopArgs{OrderID: "H-1"}})
	out := answers(t, waiter)
	e.assertFitForModel(t, "in flight", out[0], waiter, oncekey.ErrTypeInFlight, act("HoldOrder",
		"Still running: the same call is in progress and nothing new was started. Wait retry_after_seconds, then make the "+
			"same call again with the same arguments to get its result. retry_after_seconds: 1.", oncekey.ErrTypeInFlight, true))
	close(e.shop.gate)
	out = answers(t, holder)
	require.Equal(t, "HoldOrder-1", out[0].Result)
	effects, bodies := e.shop.count("HoldOrder")
	require.Equal(t, 1, effects, "in flight: one effect, the holder's")
	require.Equal(t, 1, bodies, "in flight: the waiting call ran nothing")

	out = answers(t, e.start(t, "modeltext-ship", LoopCall{Tool: "ShipOrder", Args: ShopArgs{OrderID: "S-1"}}))
	require.Equal(t, "ShipOrder-1", out[0].Result)
	// Wait for the record to become a tombstone: past its 2 s retention, purged.
	require.Eventually(t, func() bool {
		res, err := e.store.Purge(context.Background(), &oncekeystore.PurgeParams{Rest: -1})
		return err == nil && res.Tombstoned == 1
	}, 30*time.Second, 100*time.Millisecond, "the record never became a tombstone")
	expired := e.start(t, "modeltext-expired", LoopCall{Tool: "ShipOrder", Args: ShopArgs{OrderID: "S-1"}})
	out = answers(t, expired)
	e.assertFitForModel(t, "expired", out[0], expired, oncekey.ErrTypeExpired, act("ShipOrder",
		"Too old: this operation is past the time its outcome is kept, so it was not done again. Ask the user before doing "+
			"it as a new action.", oncekey.ErrTypeExpired, false))
	effects, bodies = e.shop.count("ShipOrder")
	require.Equal(t, 1, effects, "expired: never a silent second shipment")
	require.Equal(t, 1, bodies)
}
