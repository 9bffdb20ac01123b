package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// approvalView is an approval as the CLI prints it.
type approvalView struct {
	Tenant       string                      `json:"tenant"`
	OperationKey string                      `json:"operation_key"`
	Namespace    string                      `json:"namespace,omitempty"`
	Tool         string                      `json:"tool"`
	WorkflowID   string                      `json:"workflow_id"`
	StepID       string                      `json:"step_id"`
	Summary      string                      `json:"summary"`
	Status       oncekeystore.ApprovalStatus `json:"status"`
	Episode      int64                       `json:"episode"`
	Fingerprint  string                      `json:"fingerprint"`
	RequestedAt  time.Time                   `json:"requested_at"`
	Deadline     time.Time                   `json:"deadline"`
	DecidedAt    *time.Time                  `json:"decided_at,omitempty"`
	DecidedBy    string                      `json:"decided_by,omitempty"`
	Reason       string                      `json:"reason,omitempty"`
	ExpiresAt    *time.Time                  `json:"expires_at,omitempty"`
	// Delivered is a decision delivered to the pending approval's workflow that no worker has
	// taken yet (show only, when Temporal can say).
	Delivered *deliveredView `json:"decision_delivered,omitempty"`
	// ModelMessage is what the decision said to the model; ChangesRequested, that a denial asked
	// for other arguments; EditOf and EditedAs link an edit and the call it replaced.
	ModelMessage     string `json:"model_message,omitempty"`
	ChangesRequested bool   `json:"changes_requested,omitempty"`
	EditOf           string `json:"edit_of,omitempty"`
	EditedAs         string `json:"edited_as,omitempty"`
	// GrantID names the standing grant that approved the episode (DecidedBy made it).
	GrantID string `json:"grant_id,omitempty"`
	// Signature is who signed the decision and whether it verifies (show only; absent when the
	// decision was not signed).
	Signature *verdict `json:"signature,omitempty"`
	// Signers are, for an approval that asked for more than one signer, each signer in the order
	// they signed, verified or not (show only; absent for one signer).
	Signers *signersView `json:"signers,omitempty"`
}

func approvalViewOf(ap *oncekeystore.Approval) *approvalView {
	return &approvalView{
		Tenant: ap.Tenant, OperationKey: ap.OperationKey, Namespace: ap.Namespace, Tool: ap.Tool,
		WorkflowID: ap.WorkflowID, StepID: ap.StepID, Summary: ap.Summary, Status: ap.Status,
		Episode: ap.Episode, Fingerprint: ap.Fingerprint,
		RequestedAt: ap.RequestedAt.UTC(), Deadline: ap.Deadline.UTC(), DecidedAt: timePtr(ap.DecidedAt),
		DecidedBy: ap.DecidedBy, Reason: ap.Reason, ExpiresAt: timePtr(ap.ExpiresAt),
		ModelMessage: ap.ModelMessage, ChangesRequested: ap.ChangesRequested, EditOf: ap.EditOf, EditedAs: ap.EditedAs, GrantID: ap.GrantID,
	}
}

// approvalStatusFlag reads --status of `oncekey approvals`: "" is pending, "all" no filter.
func approvalStatusFlag(s string) (oncekeystore.ApprovalStatus, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "", string(oncekeystore.ApprovalPending):
		return oncekeystore.ApprovalPending, nil
	case "all":
		return "", nil
	default:
		if st := oncekeystore.ApprovalStatus(v); st.Valid() {
			return st, nil
		}
	}
	return "", fmt.Errorf("--status %q is not one of pending, approved, denied, timed_out, all", s)
}

// listApprovals pages through ListApprovals until limit approvals or the end; more reports that
// the limit cut the list.
func listApprovals(ctx context.Context, s oncekeystore.ApprovalStore, p oncekeystore.ListApprovalsParams, limit int) ([]*oncekeystore.Approval, bool, error) {
	return listPages(limit, func(n int, cursor string) ([]*oncekeystore.Approval, string, error) {
		p.Limit, p.Cursor = n, cursor
		res, err := s.ListApprovals(ctx, &p)
		if err != nil {
			return nil, "", err
		}
		return res.Approvals, res.Next, nil
	})
}

func newApprovalsCmd(a *app) *cobra.Command {
	var (
		status string
		l      listFlags
	)
	cmd := &cobra.Command{
		Use:   "approvals [--tenant T] [--tool X] [--status pending|approved|denied|timed_out|all] [--json]",
		Short: "List approval requests (pending ones by default, oldest first)",
		Long: "approvals lists the calls that wait for a person's approval (Policy.Approval), oldest request first: the operation\n" +
			"key, the episode a decision names, the tenant, the tool, the workflow, how long it has waited, when it times out and\n" +
			"the summary the tool's policy wrote for the approver (the arguments themselves are never stored).\n" +
			"Decide with `oncekey approve KEY` or `oncekey deny KEY --reason WHY`; --status shows decided ones too.",
		Example: "  oncekey approvals\n" +
			"  oncekey approvals --tenant acme --tool IssueRefund\n" +
			"  oncekey approvals --status denied --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := approvalStatusFlag(status)
			if err := l.check(err); err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				aps, more, err := listApprovals(ctx, s, oncekeystore.ListApprovalsParams{Status: st, Tenant: l.tenant, Tool: l.tool, WorkflowID: l.workflow}, l.limit)
				if err != nil {
					return a.storeError("approvals", err)
				}
				if l.asJSON {
					if len(aps) == 0 {
						if hint := a.approvalToolHint(ctx, s, l.tenant, l.tool); hint != "" {
							fmt.Fprintln(a.stderr, "oncekey: "+hint)
						}
					}
					views := make([]*approvalView, 0, len(aps))
					for _, ap := range aps {
						views = append(views, approvalViewOf(ap))
					}
					return writeJSON(a.stdout, views)
				}
				if len(aps) == 0 {
					msg := "no approvals match"
					if st == oncekeystore.ApprovalPending {
						msg = "no approvals wait (--status all lists decided ones too)"
					}
					if hint := a.approvalToolHint(ctx, s, l.tenant, l.tool); hint != "" {
						msg += "; " + hint
					}
					fmt.Fprintln(a.stdout, msg)
					return nil
				}
				pendingOnly := st == oncekeystore.ApprovalPending
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				if pendingOnly {
					fmt.Fprintln(tw, "OPERATION KEY\tEPISODE\tTENANT\tTOOL\tWORKFLOW\tAGE\tTIMES OUT\tSUMMARY")
				} else {
					fmt.Fprintln(tw, "OPERATION KEY\tEPISODE\tTENANT\tTOOL\tWORKFLOW\tSTATUS\tAGE\tDECIDED BY\tSUMMARY")
				}
				for _, ap := range aps {
					if pendingOnly {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(ap.OperationKey), ap.Episode, cell(ap.Tenant), cell(ap.Tool),
							cell(ap.WorkflowID), age(ap.RequestedAt), timesOut(ap), cell(ap.Summary))
						continue
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(ap.OperationKey), ap.Episode, cell(ap.Tenant), cell(ap.Tool),
						cell(ap.WorkflowID), cell(string(ap.Status)), age(ap.RequestedAt), cell(ap.DecidedBy), cell(ap.Summary))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				l.printMore(a, len(aps), more)
				if pendingOnly {
					first := aps[0]
					fmt.Fprintf(a.stdout, "decide the oldest with `%s` or `%s`; `%s` shows it\n",
						a.decideCommand(reconcile.Approve, first.OperationKey, first.Tenant, first.Episode),
						a.decideCommand(reconcile.Deny, first.OperationKey, first.Tenant, first.Episode),
						a.showCommand(first.OperationKey, first.Tenant))
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "pending", "only this status: pending, approved, denied, timed_out, or all")
	l.add(cmd, "approvals", "only this tool (activity type, matched exactly)")
	return cmd
}

// approvalToolHint is toolHint for approvals: the tools of tenant's approvals (the oldest 1000)
// that differ from tool only in case. "" when tool is "" or none does.
func (a *app) approvalToolHint(ctx context.Context, s oncekeystore.ApprovalStore, tenant, tool string) string {
	if tool == "" {
		return ""
	}
	aps, _, err := listApprovals(ctx, s, oncekeystore.ListApprovalsParams{Tenant: tenant}, 1000)
	if err != nil {
		return ""
	}
	stored := make([]string, 0, len(aps))
	for _, ap := range aps {
		stored = append(stored, ap.Tool)
	}
	return caseHint(tool, stored)
}

// timesOut is the TIMES OUT cell of a pending approval: until its deadline, marked "(soon)" in the
// last quarter of its wait (oncekeystore.Approval.NearDeadline).
func timesOut(ap *oncekeystore.Approval) string {
	if ap.NearDeadline(time.Now()) {
		return until(ap.Deadline) + " (soon)"
	}
	return until(ap.Deadline)
}

// until says how long until t: "in 3h59m", "in 12m", or "passed" once it has.
func until(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Until(t)
	if d <= 0 {
		return "passed"
	}
	if s := span(d); s != "" {
		return "in " + s
	}
	return t.UTC().Format("2006-01-02")
}

// span is d as age and until print it, cut down (never up) to the unit below the largest:
// "45s", "12m", "3h59m", "23h"; "" from 48h on (they print the date then).
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", int(d.Hours()), m)
		}
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return ""
}

// getApproval reads the approval of (tenant, key) for `oncekey show`: nil when there is none, or
// when the schema has no approvals table yet (nothing can have asked).
func getApproval(ctx context.Context, s oncekeystore.ApprovalStore, tenant, key string) (*oncekeystore.Approval, error) {
	ap, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	if errors.Is(err, oncekeystore.ErrNotFound) || noApprovalsTable(err) {
		return nil, nil // none, or the schema predates approvals (`oncekey migrate` adds them)
	}
	return ap, err
}

// noApprovalsTable reports whether err is Postgres saying the approvals table does not exist: a
// schema migrated before pgstore's 003_approvals.
func noApprovalsTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01" && strings.Contains(pgErr.Message, "oncekey_approvals")
}

// printApproval writes the approval's lines of `oncekey show` to tw, each "approval …" field on a
// line of its own, stored strings escaped.
func printApproval(tw *tabwriter.Writer, ap *approvalView) {
	line := func(k, val string) { fmt.Fprintf(tw, "%s\t%s\n", k, val) }
	line("approval", cell(string(ap.Status))+", episode "+strconv.FormatInt(ap.Episode, 10))
	line("approval summary", cell(ap.Summary))
	line("approval requested", ap.RequestedAt.Format(time.RFC3339))
	if ap.Status == oncekeystore.ApprovalPending {
		line("approval deadline", ap.Deadline.Format(time.RFC3339)+" ("+until(ap.Deadline)+")")
		if ap.Delivered != nil {
			line("approval on its way", deliveredLine(ap.Delivered))
		}
	} else {
		line("approval deadline", ap.Deadline.Format(time.RFC3339))
	}
	if ap.DecidedAt != nil {
		line("approval decided", ap.DecidedAt.Format(time.RFC3339)+" by "+cell(ap.DecidedBy))
	}
	if ap.Reason != "" {
		line("approval reason", cell(ap.Reason))
	}
	if ap.ChangesRequested {
		line("changes requested", "yes: the model was asked for other arguments")
	}
	if ap.ModelMessage != "" {
		line("message for the model", cell(ap.ModelMessage))
	}
	if ap.EditedAs != "" {
		line("replaced by the edit", cell(ap.EditedAs)+" (approved with edited arguments; the call as proposed never runs)")
	}
	if ap.EditOf != "" {
		line("edit of", cell(ap.EditOf)+" (a person approved that call with these arguments instead)")
	}
	if ap.Signature != nil {
		line("approval signed by", ap.Signature.String())
	}
	if ap.Signers != nil {
		if ap.Signers.Text != "" {
			line("approval signers", ap.Signers.Text)
		}
		for i := range ap.Signers.Signers {
			line("approval signer "+strconv.Itoa(i+1), ap.Signers.Signers[i].String())
		}
	}
	if ap.GrantID != "" {
		line("approval grant", ap.GrantID+" (made by "+cell(ap.DecidedBy)+"; `oncekey grants --status all` shows it)")
	}
	if ap.ExpiresAt != nil {
		line("approval kept until", ap.ExpiresAt.Format(time.RFC3339))
	}
}

// noRecordLine is show's line for an operation whose approval exists but whose record does not:
// the call has not claimed its key (it waits, or it was refused).
func noRecordLine(ap *approvalView) string {
	switch ap.Status {
	case oncekeystore.ApprovalPending:
		return "none yet: the call waits for this approval and has not run"
	case oncekeystore.ApprovalApproved:
		return "none yet: approved, the call has not claimed its key (it runs when its workflow schedules it)"
	case oncekeystore.ApprovalTimedOut:
		return "none: nobody decided in time, so the call was refused and never ran; its next call asks again"
	case oncekeystore.ApprovalReplaced:
		return "none: approved with edited arguments, so the call as proposed never ran; the edit runs under its own key (below)"
	}
	return "none: the call was refused and never ran"
}

// approvalsCommand is the `oncekey approvals` command for tenant, with the flags it needs to read
// the table this command was pointed at.
func (a *app) approvalsCommand(tenant string) string {
	return a.db(shell.Approvals().Flag("--tenant", tenant)).String()
}

// deliveredView is a decision delivered to a pending approval's workflow that no worker has
// taken yet: a decide signal in its history after the last workflow task a worker completed.
type deliveredView struct {
	Decision    reconcile.DecisionKind `json:"decision"`
	DecidedBy   string                 `json:"decided_by,omitempty"`
	DeliveredAt time.Time              `json:"delivered_at"`
	TaskQueue   string                 `json:"task_queue"`
}

// deliveredDecision asks Temporal (best effort, a few seconds at most) whether a decision is on
// its way to the approval workflow of key: the last oncekey.decide signal in its history that no
// workflow task has taken yet. nil when there is none or Temporal cannot say (not reachable, no
// such workflow). namespace is the approval's ("" for a.ns()). A decision sent as an update is not in the history until a worker accepts it,
// so only the signal (which approve and deny send when no worker takes the update) shows.
func (a *app) deliveredDecision(ctx context.Context, key, namespace string) *deliveredView {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if namespace == "" {
		namespace = a.ns()
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: a.temporalAddress(), Namespace: namespace, Logger: quietLogger{}})
	if err != nil {
		return nil
	}
	defer c.Close()
	id := reconcile.ApprovalWorkflowID(key)
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var (
		pending     []*historypb.HistoryEvent
		lastStarted int64
		tq          string
	)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			tq = ev.GetWorkflowExecutionStartedEventAttributes().GetTaskQueue().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			lastStarted = ev.GetEventId()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			// The task a worker completed saw every signal before it started.
			kept := pending[:0]
			for _, p := range pending {
				if p.GetEventId() > lastStarted {
					kept = append(kept, p)
				}
			}
			pending = kept
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == reconcile.DecideSignalName {
				pending = append(pending, ev)
			}
		}
	}
	if len(pending) == 0 {
		return nil
	}
	last := pending[len(pending)-1]
	v := &deliveredView{DeliveredAt: last.GetEventTime().AsTime().UTC(), TaskQueue: tq}
	var d reconcile.Decision
	if converter.GetDefaultDataConverter().FromPayloads(last.GetWorkflowExecutionSignaledEventAttributes().GetInput(), &d) == nil {
		v.Decision, v.DecidedBy = d.Decision, d.DecidedBy
	}
	return v
}

// deliveredLine is show's line for a decision on its way.
func deliveredLine(d *deliveredView) string {
	what := "a decision"
	switch d.Decision {
	case reconcile.Approve:
		what = "an approval"
	case reconcile.Deny:
		what = "a denial"
	}
	if d.DecidedBy != "" {
		what += " by " + printable(d.DecidedBy)
	}
	where := "its task queue"
	if d.TaskQueue != "" {
		where = "task queue " + printable(d.TaskQueue)
	}
	return fmt.Sprintf("%s was delivered %s (%s) and waits for a worker: it is taken once one runs %s",
		what, age(d.DeliveredAt), d.DeliveredAt.Format(time.RFC3339), where)
}
