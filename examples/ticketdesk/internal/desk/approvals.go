package desk

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// ApprovalThresholdCents is the refund above which, in the approval scene, a person decides
// before the refund runs (100.00).
const ApprovalThresholdCents = 10000

// The approval scene's two requests: a large refund the operator approves with a smaller amount,
// and one the operator denies with a message for the model.
const (
	SceneEditRequest = "REQ-A01"
	SceneDenyRequest = "REQ-A02"
	// SceneEditedCents is the amount the operator approves instead of the one asked.
	SceneEditedCents = 9500
	// SceneDenyMessage is what the model reads with the denial; SceneDenyReason, the operator's
	// note recorded with it, never reaches the model.
	SceneDenyMessage = "Refunds for late deliveries go through the billing team: tell the customer billing will contact them within two working days."
	SceneDenyReason  = "late-delivery refunds are billing's (ops ticket OPS-4411)"
)

// ApprovalScene is what the approval scene produced: a run of its own after the main one, in a
// tenant of its own, whose IssueRefund waits for a person above ApprovalThresholdCents.
type ApprovalScene struct {
	// Edited and Denied count the decisions the operator loop sent.
	Edited, Denied int
	// RefundEffects counts the refunds the payments service landed during the scene; Refunded
	// is the amount of each, in cents.
	RefundEffects int
	Refunded      []int64
	// Read is what the model read for each refund it proposed, request by request.
	Read []SceneRead
	// Errors lists what went wrong ("REQ-A01: ...").
	Errors []string
}

// SceneRead is one refund result the model read in the approval scene.
type SceneRead struct {
	RequestID string
	// ForModel is the tool message the model read (Outcome.forModel).
	ForModel string
}

// refundApproval is IssueRefund's approval policy in the scene: refunds above the threshold, and
// the summary a person decides on.
var refundApproval = &oncekey.ApprovalPolicy{
	Required: func(op oncekey.Operation) bool {
		var in RefundInput
		return json.Unmarshal(op.ArgsJSON, &in) != nil || in.AmountCents > ApprovalThresholdCents
	},
	Summary: func(op oncekey.Operation) string {
		var in RefundInput
		_ = json.Unmarshal(op.ArgsJSON, &in)
		return fmt.Sprintf("refund %d.%02d %s on order %s for customer %s (%s)", in.AmountCents/100, in.AmountCents%100, in.Currency, in.OrderID, in.CustomerID, in.Reason)
	},
	Timeout: 2 * time.Minute,
}

// sceneRequests returns the scene's two requests, for the first customer refunds are allowed for.
func sceneRequests(customers []Customer) ([]Request, bool) {
	for _, c := range customers {
		if !c.RefundsAllowed {
			continue
		}
		return []Request{
			{ID: SceneEditRequest, CustomerID: c.ID, Channel: "phone", Subject: "Blender stopped working after a week",
				Body: "My blender died after one week. I want the full 190 EUR back.", Priority: "normal",
				Refund: &RefundAsk{OrderID: "O-90001", AmountCents: 19000, Currency: "EUR", Reason: "defective"}},
			{ID: SceneDenyRequest, CustomerID: c.ID, Channel: "web", Subject: "Parcel came two weeks late",
				Body: "The parcel arrived two weeks after the promised date. Refund the 150 EUR please.", Priority: "normal",
				Refund: &RefundAsk{OrderID: "O-90002", AmountCents: 15000, Currency: "EUR", Reason: "late"}},
		}, true
	}
	return nil, false
}

// runApprovalScene plays the scene on st's services and model: a worker whose IssueRefund needs
// approval above ApprovalThresholdCents, the two scene requests, and an operator loop that
// approves the first refund with the amount edited down to SceneEditedCents and denies the
// second with SceneDenyMessage for the model.
func runApprovalScene(ctx context.Context, cfg Config, st *stack, tag string) (*ApprovalScene, error) {
	scene := &ApprovalScene{}
	reqs, ok := sceneRequests(cfg.Customers)
	if !ok {
		scene.Errors = append(scene.Errors, "no customer may be refunded: the scene did not run")
		return scene, nil
	}
	reg, err := st.tools.PoliciesWith(refundApproval)
	if err != nil {
		return nil, err
	}
	store := pgstore.New(cfg.Pool, nil)
	tenant := cfg.Tenant + "-approvals"
	plugin, err := okworker.NewPlugin(okworker.Options{
		Store: store, Registry: reg, Tenant: constTenant(tenant), DataConverter: converter.GetDefaultDataConverter(),
		EscalationTimeout: cfg.EscalationTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("desk: approval scene plugin: %w", err)
	}
	taskQueue := "ticketdesk-approvals-" + tag
	w := tworker.New(cfg.Client, taskQueue, tworker.Options{Plugins: []tworker.Plugin{plugin}})
	w.RegisterWorkflowWithOptions((&Agent{Registry: reg}).Run, workflow.RegisterOptions{Name: AgentWorkflow})
	w.RegisterActivity(st.tools)
	w.RegisterActivityWithOptions(st.model.CallModel, activity.RegisterOptions{Name: ActivityCallModel})
	w.RegisterActivityWithOptions(st.proxy.CallMcpTool, activity.RegisterOptions{Name: ActivityCallMcpTool})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("desk: approval scene worker: %w", err)
	}
	defer w.Stop()
	before := len(st.services.Payments.Ledger.Effects())

	opCtx, stopOp := context.WithCancel(ctx)
	opDone := make(chan struct{})
	go func() { defer close(opDone); decideScene(opCtx, cfg, store, tenant, reqs, scene) }()

	sceneCfg := cfg
	sceneCfg.Requests, sceneCfg.Tenant, sceneCfg.Done = reqs, tenant, func(string, int, int) {}
	var played ModeReport
	played.Mode = "oncekey"
	results := playAll(ctx, sceneCfg, taskQueue, "ticketdesk-"+tag+"-approvals-", &played)
	scene.Errors = append(scene.Errors, played.WorkflowErrors...)
	stopOp()
	<-opDone

	for _, e := range st.services.Payments.Ledger.Effects()[before:] {
		scene.RefundEffects++
		var rf Refund
		if json.Unmarshal(e.Body, &rf) == nil {
			scene.Refunded = append(scene.Refunded, rf.AmountCents)
		}
	}
	sort.Slice(results, func(i, j int) bool { return results[i].RequestID < results[j].RequestID })
	for _, res := range results {
		for _, c := range res.Calls {
			if c.Tool == ToolIssueRefund {
				scene.Read = append(scene.Read, SceneRead{RequestID: res.RequestID, ForModel: c.Outcome.forModel()})
			}
		}
	}
	if cfg.TranscriptDir != "" {
		if err := writeTranscripts(filepath.Join(cfg.TranscriptDir, "approvals"), results); err != nil {
			return nil, err
		}
	}
	return scene, nil
}

// decideScene is the operator loop of the scene: it waits for each refund's approval to wait for
// a person and decides it as the scene says, through reconcile.Decide, as a person would from
// `oncekey approve --args` or `oncekey deny --message`. The operator knows the ticket (the
// request), not the call's arguments: it writes the refund it approves in full.
func decideScene(ctx context.Context, cfg Config, store *pgstore.Store, tenant string, reqs []Request, scene *ApprovalScene) {
	decided := map[string]bool{}
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for len(decided) < len(reqs) {
		page, err := store.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, Tenant: tenant})
		if err == nil {
			for _, ap := range page.Approvals {
				for _, req := range reqs {
					if decided[req.ID] || !strings.Contains(ap.Summary, req.Refund.OrderID) {
						continue
					}
					if rep, err := reconcile.QueryApproval(ctx, cfg.Client, ap.OperationKey); err != nil || rep.State != reconcile.ApprovalStateWaiting {
						continue
					}
					if sceneDecide(ctx, cfg, ap, req) == nil {
						decided[req.ID] = true
						if req.ID == SceneEditRequest {
							scene.Edited++
						} else {
							scene.Denied++
						}
						cfg.Progress(fmt.Sprintf("approvals: %s %s", req.ID, map[bool]string{true: "approved with the amount edited down", false: "denied with a message for the model"}[req.ID == SceneEditRequest]))
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sceneDecide sends the scene's decision for req's refund approval ap.
func sceneDecide(ctx context.Context, cfg Config, ap *oncekeystore.Approval, req Request) error {
	d := reconcile.Decision{Tenant: ap.Tenant, Episode: ap.Episode, DecidedBy: OperatorName}
	if req.ID == SceneEditRequest {
		args, err := json.Marshal(RefundInput{RequestID: req.ID, CustomerID: req.CustomerID, OrderID: req.Refund.OrderID,
			AmountCents: SceneEditedCents, Currency: req.Refund.Currency, Reason: req.Refund.Reason})
		if err != nil {
			return err
		}
		d.Decision, d.Arguments, d.Reason = reconcile.Approve, args, "half the price back, as agreed with the customer on the phone"
	} else {
		d.Decision, d.Reason, d.Message = reconcile.Deny, SceneDenyReason, SceneDenyMessage
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := reconcile.Decide(dctx, cfg.Client, ap.OperationKey, d)
	return err
}
