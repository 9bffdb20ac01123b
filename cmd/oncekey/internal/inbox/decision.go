package inbox

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/oncekey/oncekey/cmd/oncekey/internal/workflowrun"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// decisionPost is a decision posted from a record's or an approval's form: what the two
// protocols do differently. Server.post does what they share.
type decisionPost struct {
	p decisiontext.Protocol
	// what names what the form is about ("record", "approval"); fence the form's field naming the
	// episode decided ("epoch", "episode").
	what, fence string
	// logMsg is the log line's message; choiceField names the choice in it ("outcome", "decision").
	logMsg, choiceField, choice string
	tenant, key, fenceValue     string
	// unavailable, when not "", is why nothing can be decided here at all (no approvals kept).
	unavailable string
	// show renders the page with the answer (the form emptied once a decision was accepted).
	show func(status int, a *answer)
	// check builds the decision at fence from the form and validates it; it answers through
	// refuse and returns false when it refuses.
	check func(fence int64, refuse func(title, detail string)) bool
	// stored reads what the form is about as the store has it now (err as the store returned it)
	// and returns the refusal of a decision about it when it changed since the page was loaded;
	// nil when it still waits at fence.
	stored func(ctx context.Context, fence int64) (changed *answer, err error)
	// send sends the decision with requestID and returns, for an accepted one, what was recorded
	// ("approved") and the workflow's answer (decisiontext's words).
	send func(ctx context.Context, requestID string) (recorded, answered string, err error)
	// released says who continues once the decision is recorded.
	released string
	// first is the answer to a decision about key refused (err, or no workflow found) because
	// another decided first; nil when the store says it still waits at fence.
	first func(ctx context.Context, tenant, key string, fence int64, err error) *answer
	// none is the detail of the answer when no workflow waits for the decision at fence.
	none func(fence int64) string
}

// recordedWaiting is what a partial approval recorded (an approval of a request whose policy asks
// for more signers than have approved it): the request keeps waiting for another signer.
const recordedWaiting = "approval recorded, waiting for another signer"

// post takes a decision from a form: it checks that the form names what it decides and that the
// identity may decide for its tenant, builds and validates the decision, refuses it when what it
// is about changed since the page was loaded, sends it, and shows the workflow's answer (each
// outcome's words from decisiontext).
func (s *Server) post(w http.ResponseWriter, r *http.Request, id *identity, d *decisionPost) {
	show := func(status int, a *answer) {
		s.opts.Logger.Info(d.logMsg, "by", id.resolvedBy(), "tenant", d.tenant, "key", d.key, d.fence, d.fenceValue, d.choiceField, d.choice, "answer", a.Kind, "detail", a.Title)
		d.show(status, a)
	}
	if d.tenant == "" || d.key == "" {
		s.message(w, r, http.StatusBadRequest, "Which "+d.what+"?", "The form names no "+d.what+". Open one from the inbox.")
		return
	}
	if !id.allows(d.tenant) {
		s.opts.Logger.Warn(d.logMsg, "by", id.resolvedBy(), "tenant", d.tenant, "key", d.key, d.fence, d.fenceValue, d.choiceField, d.choice, "answer", "refused", "detail", "the identity may not decide for this tenant")
		s.message(w, r, http.StatusForbidden, "Not your tenant", "Your access token is not allowed to decide for tenant "+strconv.Quote(d.tenant)+". Nothing was changed.")
		return
	}
	if d.unavailable != "" {
		s.message(w, r, http.StatusNotFound, "No "+d.what+"s here", d.unavailable+" Nothing was changed.")
		return
	}
	refuse := func(title, detail string) {
		show(http.StatusUnprocessableEntity, &answer{Kind: "refused", Title: title, Detail: detail})
	}
	fence, err := strconv.ParseInt(d.fenceValue, 10, 64)
	if err != nil || fence < 1 {
		refuse("Refused: the form names no "+d.fence, "Reload the "+d.what+" and decide again.")
		return
	}
	if !d.check(fence, refuse) {
		return
	}
	// The decision is about what the form showed: one decided since, or asked anew at another
	// fence, is not decided blind.
	changed, err := d.stored(r.Context(), fence)
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		s.message(w, r, http.StatusNotFound, "No such "+d.what, "No "+d.what+" has this operation key in tenant "+strconv.Quote(d.tenant)+". Nothing was changed.")
		return
	case err != nil:
		show(http.StatusBadGateway, &answer{Kind: "error", Title: "Could not read the " + d.what, Detail: oneLine(err) + ". Nothing was sent; try again when the store is reachable."})
		return
	case changed != nil:
		show(http.StatusConflict, changed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), reconcile.ConfirmWait+5*time.Second)
	defer cancel()
	recorded, answered, err := d.send(ctx, requestID(r.PostFormValue("request_id")))
	o, reason := d.p.Outcome(err)
	title := d.p.Title(o)
	switch o {
	case decisiontext.Accepted:
		released := " " + d.released
		if recorded == recordedWaiting {
			released = "" // a partial approval releases nothing
		}
		show(http.StatusOK, &answer{Kind: "accepted", Title: "Accepted: " + recorded,
			Detail: "The " + d.p.Workflow + " " + d.p.WorkflowID(d.key) + " answered: " + answered + "." + released})
	case decisiontext.Invalid:
		refuse(title, oneLine(err)+". Nothing was sent.")
	case decisiontext.Refused, decisiontext.NoWorkflow:
		// Another decision may have settled it first (two people deciding at once): the store
		// says by whom, how and when.
		if a := d.first(r.Context(), d.tenant, d.key, fence, err); a != nil {
			show(http.StatusConflict, a)
			return
		}
		detail := d.none(fence)
		switch {
		case o == decisiontext.Refused && errors.Is(err, decisionsig.ErrRefused):
			// The reason says what to sign it with.
			title, detail = decisiontext.SignatureTitle, reason+". Nothing was recorded for this decision; the workflow keeps waiting."
		case o == decisiontext.Refused:
			detail = reason + ". Nothing was recorded for this decision; the workflow keeps waiting: correct it and send it again."
		}
		show(http.StatusConflict, &answer{Kind: "refused", Title: title, Detail: detail})
	case decisiontext.Unconfirmed:
		id := d.p.WorkflowID(d.key)
		show(http.StatusAccepted, &answer{Kind: "unconfirmed", Title: title,
			Detail: sentence(d.p.UnconfirmedText(d.p.Decision, id, workflowrun.Unconfirmed(r.Context(), s.opts.Temporal, id, d.p.Workflow))) +
				". Reload this page to see whether it was recorded."})
	default:
		show(http.StatusBadGateway, &answer{Kind: "error", Title: title,
			Detail: oneLine(err) + ". It may not have received the decision: reload and check the " + d.what + " before sending it again."})
	}
}

// sentence is s with its first letter upper case.
func sentence(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
