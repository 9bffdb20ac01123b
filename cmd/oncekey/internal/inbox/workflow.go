package inbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oncekey/oncekey/cmd/oncekey/internal/workflowrun"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

// decisionPage is what a record's page and an approval's page share: the lines shown, the
// protocol's workflow and how it stands, and the decision form's hidden fields.
type decisionPage struct {
	Tenant, Key string
	Fields      []field
	// WorkflowID is the protocol's workflow of the key; WorkflowError why no form is shown (the
	// workflow could not be asked, does not exist or closed); WorkflowClosed how it closed
	// ("terminated", "timed out"…), "" while it runs or when none exists.
	WorkflowID, WorkflowError, WorkflowClosed string
	// WorkflowTitle heads what the workflow said about itself, WorkflowLines (its state first);
	// none when it was not asked.
	WorkflowTitle string
	WorkflowLines []field
	// FormAction is where the form posts ("/resolve"), FormID its element ID.
	FormAction, FormID string
	// CanDecide: the workflow waits for a decision, so the page shows the form.
	CanDecide bool
	// FenceName is the form's field naming the episode decided ("epoch", "episode"); Fence its
	// value.
	FenceName string
	Fence     int64
	// RequestID identifies the decision the form sends (see requestID).
	RequestID string
	Answer    *answer
}

// add shows the line name: v, when v is not "".
func (d *decisionPage) add(name, v string) {
	if v != "" {
		d.Fields = append(d.Fields, field{name, v})
	}
}

// workflowState fills in how the workflow of d, of protocol p, stands: the form only while it
// runs and query (the protocol's query of it, within statusWait) says it waits for a decision,
// with the lines query returns about it under p's name. A
// workflow that could not be asked, does not exist or closed is said to be so in
// d.WorkflowError, a missing or closed one followed by next (what still works).
func (s *Server) workflowState(ctx context.Context, p decisiontext.Protocol, d *decisionPage, next string, query func(ctx context.Context) (waiting bool, lines []field, err error)) {
	ctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	wf, err := workflowrun.Describe(ctx, s.opts.Temporal, d.WorkflowID)
	switch {
	case err != nil:
		d.WorkflowError = p.Unreachable(oneLine(err))
		return
	case wf.Missing:
		d.WorkflowError = p.Missing(next)
		return
	case wf.Closed != "":
		d.WorkflowError, d.WorkflowClosed = p.Closed(d.WorkflowID, closedText(wf, s.now()), next), wf.Closed
		return
	}
	waiting, lines, err := query(ctx)
	if err != nil {
		d.WorkflowError = p.Unreachable(oneLine(err))
		return
	}
	d.CanDecide = waiting
	d.WorkflowTitle = strings.ToUpper(p.Workflow[:1]) + p.Workflow[1:]
	d.WorkflowLines = lines
}

// named checks that a page's request names what it shows (tenant and key; a names it with its
// article: "A record") and that id may see the tenant; it answers and returns false when not.
func (s *Server) named(w http.ResponseWriter, r *http.Request, id *identity, a, tenant, key string) bool {
	if tenant == "" || key == "" {
		_, what, _ := strings.Cut(a, " ")
		s.message(w, r, http.StatusBadRequest, "Which "+what+"?", a+" is named by its tenant and operation key. Open one from the inbox.")
		return false
	}
	if !id.allows(tenant) {
		s.message(w, r, http.StatusForbidden, "Not your tenant", "Your access token is not allowed to see tenant "+strconv.Quote(tenant)+".")
		return false
	}
	return true
}

// found answers a page about what (a "record") in tenant whose store read returned err: when it
// does not exist (gone says why it may not), or could not be read (check says what to check). It
// returns true when err is nil.
func (s *Server) found(w http.ResponseWriter, r *http.Request, what, tenant string, err error, gone, check string) bool {
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		s.message(w, r, http.StatusNotFound, "No such "+what, "No "+what+" has this operation key in tenant "+strconv.Quote(tenant)+". "+gone+"; go back to the inbox.")
	case err != nil:
		s.message(w, r, http.StatusBadGateway, "Could not read the "+what, oneLine(err)+". "+check)
	default:
		return true
	}
	return false
}

// workflowLines are the lines of what a workflow said about itself: its state, then more (each
// left out when its value is ""), then its last refusal of a decision.
func workflowLines(state, lastRefusal string, more ...field) []field {
	var d decisionPage
	d.add("State", state)
	for _, f := range more {
		d.add(f.Name, f.Value)
	}
	d.add("Last refusal", lastRefusal)
	return d.Fields
}

// closedText says how a closed workflow ended: "was terminated at 2025-… (3h ago)".
func closedText(r workflowrun.Run, now time.Time) string {
	return "was " + r.Closed + " at " + r.ClosedAt.UTC().Format(time.RFC3339) + " (" + ageText(now, r.ClosedAt) + " ago)"
}

// directCommand is the `oncekey resolve --direct` command that writes a decision about (tenant,
// key) at epoch straight to the store, with --namespace when the inbox's is not "default"; its
// last word, "…", stands for the decision (--applied --ref R, --not-applied or --failed).
func (s *Server) directCommand(tenant, key string, epoch int64) string {
	c := shell.Resolve(key).Flag("--tenant", tenant).Int("--epoch", epoch)
	if s.opts.Namespace != "default" {
		c.Flag("--namespace", s.opts.Namespace)
	}
	return c.Switch("--direct").Placeholder("", "…").String()
}

// showCommand is the `oncekey show` command of (tenant, key).
func showCommand(tenant, key string) string {
	return shell.Show(key).Flag("--tenant", tenant).String()
}

// settledText says who settled rec, how and when: "settled as applied by omar (oncekey-serve) at
// 2025-… (epoch 1)". The record is the store's word, read after the workflow refused a decision.
func settledText(rec *oncekeystore.Record) string {
	s := "settled as " + string(rec.Status)
	if rec.Status == oncekeystore.StatusReleased {
		s = "settled as not applied (released)"
	}
	if rec.ResolvedBy != "" {
		s += " by " + rec.ResolvedBy
	}
	return s + fmt.Sprintf(" at %s (epoch %d)", rec.UpdatedAt.UTC().Format(time.RFC3339), rec.Epoch)
}

// decidedText says who decided ap, how and when: "approved by omar (oncekey-serve) at 2025-…
// (episode 1)", with the reason when there is one.
func decidedText(ap *oncekeystore.Approval) string {
	s := string(ap.Status)
	if ap.DecidedBy != "" {
		s += " by " + ap.DecidedBy
	}
	if !ap.DecidedAt.IsZero() {
		s += " at " + ap.DecidedAt.UTC().Format(time.RFC3339)
	}
	s += fmt.Sprintf(" (episode %d)", ap.Episode)
	if ap.Reason != "" {
		s += ", reason: " + ap.Reason
	}
	return s
}
