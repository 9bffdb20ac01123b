package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// approvalQueue lists the pending approvals (Policy.Approval), oldest request first. It is the
// inbox's second queue when the store keeps approvals.
func approvalQueue(as oncekeystore.ApprovalStore) queue {
	return queue{
		Name:  "approvals",
		Title: "Waiting for approval",
		Empty: "Nothing waits: no call is waiting for approval.",
		list: func(ctx context.Context, s *Server, tenant string) ([]item, bool, error) {
			res, err := as.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, Tenant: tenant, Limit: pageLimit})
			if err != nil {
				return nil, false, err
			}
			return itemsOf(s.now(), res.Approvals, func(now time.Time, ap *oncekeystore.Approval) item {
				it := row(now, ap.Tenant, ap.OperationKey, ap.Tool, ap.WorkflowID, ap.StepID, ap.RequestedAt)
				it.Summary, it.TimesOut, it.Episode = ap.Summary, untilText(now, ap.Deadline), ap.Episode
				if ap.NearDeadline(now) {
					it.TimesOut += " (soon)"
				}
				it.Link = approvalLink(ap.Tenant, ap.OperationKey)
				return it
			}), res.Next != "", nil
		},
	}
}

// approvalData is what the approval page shows.
type approvalData struct {
	decisionPage
	Tool, Status, Summary string
	Form                  decideForm
	// EditLink and EditOfLink are the pages of the edit that replaced this call, and of the call
	// this edit replaced; "" when there is none.
	EditLink, EditOfLink string
	// Record says how the operation's record stands once the call claimed its key, with
	// RecordLink to its page; "" before.
	Record, RecordLink string
}

// decideForm is the decision form's values, kept when the workflow refused them.
// Message is the text for the model; Arguments the edited arguments (an approval with them runs
// the edit instead).
type decideForm struct{ Decision, Reason, Message, Arguments string }

func (s *Server) approvalPage(w http.ResponseWriter, r *http.Request, id *identity) {
	q := r.URL.Query()
	s.showApproval(w, r, id, q.Get("tenant"), q.Get("key"), http.StatusOK, nil, decideForm{})
}

// showApproval renders the approval page for (tenant, key) with an optional answer to a decision.
func (s *Server) showApproval(w http.ResponseWriter, r *http.Request, id *identity, tenant, key string, status int, ans *answer, form decideForm) {
	if !s.named(w, r, id, "An approval", tenant, key) {
		return
	}
	if s.approvals == nil {
		s.message(w, r, http.StatusNotFound, "No approvals here", "This inbox's store keeps no approvals.")
		return
	}
	ap, err := s.approvals.GetApproval(r.Context(), &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	if !s.found(w, r, "approval", tenant, err, "It may have expired", "Check that the store is reachable (and, for Postgres, migrated: oncekey migrate), then reload.") {
		return
	}
	d := approvalData{
		decisionPage: decisionPage{Tenant: ap.Tenant, Key: ap.OperationKey, WorkflowID: reconcile.ApprovalWorkflowID(ap.OperationKey),
			FenceName: "episode", Fence: ap.Episode, RequestID: newRequestID(), Answer: ans, FormAction: "/decide", FormID: "decide-form"},
		Tool: ap.Tool, Status: string(ap.Status), Summary: ap.Summary, Form: form,
	}
	add := d.add
	now := s.now()
	add("Status", string(ap.Status))
	add("Episode", strconv.FormatInt(ap.Episode, 10))
	add("Tenant", ap.Tenant)
	add("Tool", ap.Tool)
	add("Workflow", ap.WorkflowID)
	add("Step", ap.StepID)
	add("Requested", ap.RequestedAt.UTC().Format(time.RFC3339)+" ("+ageText(now, ap.RequestedAt)+" ago)")
	if ap.Status == oncekeystore.ApprovalPending {
		soon := ""
		if ap.NearDeadline(now) {
			soon = ": soon, decide it before it is timed out"
		}
		add("Deadline", ap.Deadline.UTC().Format(time.RFC3339)+" ("+untilText(now, ap.Deadline)+soon+")")
	}
	if !ap.DecidedAt.IsZero() {
		add("Decided", ap.DecidedAt.UTC().Format(time.RFC3339)+" by "+ap.DecidedBy)
	}
	add("Reason", ap.Reason)
	add("Message for the model", ap.ModelMessage)
	if ap.ChangesRequested {
		add("Changes requested", "yes: the model was asked for other arguments")
	}
	if ap.EditedAs != "" {
		add("Replaced by the edit", ap.EditedAs+" (approved with edited arguments; the call as proposed never runs)")
		d.EditLink = approvalLink(ap.Tenant, ap.EditedAs)
	}
	if ap.EditOf != "" {
		add("Edit of", ap.EditOf+" (a person approved that call with these arguments instead)")
		d.EditOfLink = approvalLink(ap.Tenant, ap.EditOf)
	}
	add("Grant", ap.GrantID)
	add("Signed by", s.approvalSignedBy(ap))
	d.Fields = append(d.Fields, s.approvalSigners(ap)...)
	if rec, err := s.opts.Store.Get(r.Context(), &oncekeystore.GetParams{Tenant: ap.Tenant, OperationKey: ap.OperationKey}); err == nil {
		d.Record = fmt.Sprintf("%s, epoch %d", rec.Status, rec.Epoch)
		d.RecordLink = recordLink(rec.Tenant, rec.OperationKey, false)
	}
	if ap.Status == oncekeystore.ApprovalPending {
		// A workflow that has closed or never ran: the call that asked was told its approval ended
		// without a decision, and the next call of the operation asks again.
		next := "Nothing ran. The next call of the operation (its workflow running the step again) asks anew, with a form here; `" +
			showCommand(ap.Tenant, ap.OperationKey) + "` shows the approval and the record."
		s.workflowState(r.Context(), decisiontext.Approval, &d.decisionPage, next, func(ctx context.Context) (bool, []field, error) {
			rep, err := reconcile.QueryApproval(ctx, s.opts.Temporal, ap.OperationKey)
			if err != nil {
				return false, nil, err
			}
			var more []field
			if e := rep.Escalated; e != nil {
				more = append(more, field{"Escalated", "to " + e.To + " at " + e.At.UTC().Format(time.RFC3339) + ": " + e.Reason})
			}
			return rep.State == reconcile.ApprovalStateWaiting, workflowLines(string(rep.State), rep.LastInvalidSignal, more...), nil
		})
	}
	if d.Form.Decision == "" {
		d.Form.Decision = string(reconcile.Approve)
	}
	s.render(w, r, status, "approval", id, "Approve "+ap.Tool+"? · "+shortKey(ap.OperationKey), d)
}

// decide takes a decision from the approval form and hands it to the approval workflow through
// reconcile.Decide, then shows the workflow's answer on the approval page (see post).
func (s *Server) decide(w http.ResponseWriter, r *http.Request, id *identity) {
	tenant, key := r.PostFormValue("tenant"), r.PostFormValue("key")
	form := decideForm{Decision: r.PostFormValue("decision"), Reason: strings.TrimSpace(r.PostFormValue("reason")),
		Message: strings.TrimSpace(r.PostFormValue("message")), Arguments: strings.TrimSpace(r.PostFormValue("arguments"))}
	var (
		d      reconcile.Decision
		signer decisionsig.Signer
		cur    *oncekeystore.Approval // the request as the store holds it, which a signature names
	)
	p := &decisionPost{
		p: decisiontext.Approval, what: "approval", fence: "episode", logMsg: "approval decision", choiceField: "decision", choice: form.Decision,
		tenant: tenant, key: key, fenceValue: r.PostFormValue("episode"),
		show: func(status int, a *answer) {
			if a.Kind == "accepted" {
				form = decideForm{}
			}
			s.showApproval(w, r, id, tenant, key, status, a, form)
		},
		check: func(episode int64, refuse func(title, detail string)) bool {
			d = reconcile.Decision{Decision: reconcile.DecisionKind(form.Decision), Tenant: tenant, Episode: episode, DecidedBy: id.resolvedBy(),
				Reason: form.Reason, Message: form.Message}
			if form.Arguments != "" {
				d.Arguments = json.RawMessage(form.Arguments) // Validate refuses them but to approve
			}
			if err := d.Validate(); err != nil {
				var inv *reconcile.InvalidDecisionError
				if errors.As(err, &inv) && inv.Field == "Reason" && d.Decision == reconcile.Deny {
					refuse("Refused: a denial needs a reason", "Say why in the reason field; it is recorded with the approval. Nothing was sent.")
					return false
				}
				refuse(decisiontext.Approval.Title(decisiontext.Invalid), oneLine(err)+". Nothing was sent.")
				return false
			}
			var why string
			if signer, why = s.signer(id); why != "" {
				refuse(noKeyTitle, why)
				return false
			}
			return true
		},
		stored: func(ctx context.Context, episode int64) (*answer, error) {
			ap, err := s.approvals.GetApproval(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
			if err != nil || (ap.Episode == episode && ap.Status == oncekeystore.ApprovalPending) {
				cur = ap
				return nil, err
			}
			detail := fmt.Sprintf("The form showed episode %d; the approval is now %s at episode %d", episode, ap.Status, ap.Episode)
			if ap.DecidedBy != "" {
				detail += ", decided by " + ap.DecidedBy
			}
			return &answer{Kind: "refused", Title: "Refused: the approval changed since this page was loaded",
				Detail: detail + ". Nothing was sent. Read it again before deciding."}, nil
		},
		send: func(ctx context.Context, requestID string) (string, string, error) {
			d.RequestID = requestID
			if signer != nil {
				var err error
				if d, err = reconcile.SignDecision(signer, cur, d); err != nil {
					return "", "", err
				}
			}
			out, err := reconcile.Decide(ctx, s.opts.Temporal, key, d)
			if err != nil {
				return "", "", err
			}
			ans := decisiontext.ApprovalAnswer(out, nil)
			if out.Waiting() {
				return recordedWaiting, ans + ". The call does not run until another signer the workers trust approves it", nil
			}
			if out.EditedAs != "" {
				ans += "; the call runs with the edited arguments as " + out.EditedAs
			}
			return string(out.Status), ans, nil
		},
		released: "Every call waiting on this operation continues.",
		first:    s.decidedFirst,
		none:     func(int64) string { return "Nothing was recorded. The next call of the operation asks again." },
	}
	if s.approvals == nil {
		p.unavailable = "This inbox's store keeps no approvals."
	}
	s.post(w, r, id, p)
}

// decidedFirst is the answer to a decision about (tenant, key) at episode that the approval
// workflow refused, or found no workflow for, when the approval was decided another way first
// (another person's decision, its deadline): who decided it, how and when, read from the store
// (else from the workflow's answer, refused.DecidedAs). nil when the approval still waits at
// episode.
func (s *Server) decidedFirst(ctx context.Context, tenant, key string, episode int64, err error) *answer {
	var refused *reconcile.DecisionRefusedError
	errors.As(err, &refused)
	const title = "Refused: the approval was already decided"
	ap, err := s.approvals.GetApproval(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	switch {
	case err == nil && ap.Episode == episode && ap.Status != oncekeystore.ApprovalPending:
		return &answer{Kind: "refused", Title: title, Detail: "Someone decided first: the approval was " + decidedText(ap) +
			". Nothing was recorded for this decision, and nothing waits for one any more."}
	case err == nil && ap.Episode != episode:
		return &answer{Kind: "refused", Title: title, Detail: fmt.Sprintf("The decision was for episode %d; the approval is now %s. Nothing was recorded for this decision. Read it again before deciding.",
			episode, decidedText(ap))}
	case refused != nil && refused.DecidedAs != nil:
		return &answer{Kind: "refused", Title: title, Detail: "Someone decided first: the approval workflow answered " + decisiontext.ApprovalAnswer(refused.DecidedAs, nil) +
			". Nothing was recorded for this decision."}
	}
	return nil
}

// approvalLine says in one line how an approval stands: "approved, episode 1, by ines at …".
func approvalLine(ap *oncekeystore.Approval) string {
	s := fmt.Sprintf("%s, episode %d", ap.Status, ap.Episode)
	if ap.DecidedBy != "" {
		s += ", by " + ap.DecidedBy
	}
	if !ap.DecidedAt.IsZero() {
		s += " at " + ap.DecidedAt.UTC().Format(time.RFC3339)
	}
	return s
}

func approvalLink(tenant, key string) string {
	return "/approval?" + url.Values{"tenant": {tenant}, "key": {key}}.Encode()
}

// untilText says how long until t: "in 3h", or "passed".
func untilText(now, t time.Time) string {
	if !t.After(now) {
		return "passed"
	}
	return "in " + ageText(t, now)
}
