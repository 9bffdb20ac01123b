package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/cmd/oncekey/internal/workflowrun"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/internal/shell"
)

// workflowState says why the inbox shows no form for workflow id of protocol p: the message
// (WorkflowError) of a workflow it could not describe, that does not exist or that closed
// (followed by next, what still works), and how it closed; "" while it runs.
func (s *Server) workflowState(ctx context.Context, p decisiontext.Protocol, id, next string) (message, closed string) {
	wf, err := workflowrun.Describe(ctx, s.opts.Temporal, id)
	switch {
	case err != nil:
		return p.Unreachable(oneLine(err)), ""
	case wf.Missing:
		return p.Missing(next), ""
	case wf.Closed != "":
		return p.Closed(id, closedText(wf, s.now()), next), wf.Closed
	}
	return "", ""
}

// closedText says how a closed workflow ended: "was terminated at 2025-… (3h ago)".
func closedText(r workflowrun.Run, now time.Time) string {
	return "was " + r.Closed + " at " + r.ClosedAt.UTC().Format(time.RFC3339) + " (" + ageText(now, r.ClosedAt) + " ago)"
}

// directCommand is the `oncekey resolve --direct` command that writes a decision about (tenant,
// key) at epoch straight to the store, with --namespace when the inbox's is not "default"; its
// last word, "…", stands for the decision (--applied --ref R, --not-applied or --failed).
func (s *Server) directCommand(tenant, key string, epoch int64) string {
	c := shell.Cmd("oncekey", "resolve").Arg(key).Flag("--tenant", tenant).Int("--epoch", epoch)
	if s.opts.Namespace != "default" {
		c.Flag("--namespace", s.opts.Namespace)
	}
	return c.Switch("--direct").Placeholder("", "…").String()
}

// showCommand is the `oncekey show` command of (tenant, key).
func showCommand(tenant, key string) string {
	return shell.Cmd("oncekey", "show").Arg(key).Flag("--tenant", tenant).String()
}

// settledText says who settled rec, how and when: "settled as applied by omar (oncekey-serve) at
// 2025-… (epoch 1)". The record is the store's word, read after the workflow refused a decision.
func settledText(rec *oncekey.Record) string {
	s := "settled as " + string(rec.Status)
	if rec.Status == oncekey.StatusReleased {
		s = "settled as not applied (released)"
	}
	if rec.ResolvedBy != "" {
		s += " by " + rec.ResolvedBy
	}
	return s + fmt.Sprintf(" at %s (epoch %d)", rec.UpdatedAt.UTC().Format(time.RFC3339), rec.Epoch)
}

// decidedText says who decided ap, how and when: "approved by omar (oncekey-serve) at 2025-…
// (episode 1)", with the reason when there is one.
func decidedText(ap *oncekey.Approval) string {
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
