package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/textcheck"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// decideFlags are the flags of `oncekey approve` and `oncekey deny`.
type decideFlags struct {
	deciderFlags
	reason string
	// message is --message, the text for the model; args is approve's --args, the edited
	// arguments; changes is deny's --request-changes.
	message string
	args    string
	changes bool
	// episode is --episode: the approval's episode the decision is for; 0 reads the pending one
	// from the store.
	episode int64
}

func newApproveCmd(a *app) *cobra.Command { return newDecideCmd(a, reconcile.Approve) }
func newDenyCmd(a *app) *cobra.Command    { return newDecideCmd(a, reconcile.Deny) }

func newDecideCmd(a *app, kind reconcile.DecisionKind) *cobra.Command {
	var f decideFlags
	approve := kind == reconcile.Approve
	cmd := &cobra.Command{
		Use:   "approve KEY [--tenant T] [--episode N] [--by NAME] [--reason R]",
		Short: "Approve a call that waits for approval: it runs (Policy.Authorize still decides)",
		Long: "approve sends the approval workflow waiting on KEY (oncekey-approval-KEY) the decision as the oncekey.decide\n" +
			"Workflow Update (the signal of that name where an update cannot be used), waits (up to 10s in all,\n" +
			"the signal included) until the workflow accepts or refuses it, and prints the workflow's answer: who decided, when.\n" +
			"Every call waiting on the key continues: approved, it runs; denied, it fails as rejected and nothing runs. Delivered\n" +
			"but not confirmed in time exits 6: a worker must be running the approval workflow's task queue (the message names\n" +
			"it); the decision lands once one runs.\n\n" +
			"--episode names the approval request the decision is for, as `oncekey approvals` prints it; left out, the pending\n" +
			"episode is read from the store. A decision for an episode that is no longer pending is refused, so a decision sent\n" +
			"twice, or by two people, lands at most once.\n\n" +
			"--args approves the call with other arguments: one JSON object, the tool's whole input as it should run. The\n" +
			"worker checks it against the tool's input type before anything is recorded (a member the type does not have,\n" +
			"a wrong type: refused, exit 1, and the approval keeps waiting). The call as proposed is then settled as replaced\n" +
			"and never runs; the edit runs as a new operation with its own key (printed), and the model reads which\n" +
			"arguments changed. The tool, tenant and namespace cannot be edited.\n\n" +
			"Find what waits with `oncekey approvals`.",
		Example: "  oncekey approve ok1_3f2a… --tenant acme --reason 'customer called, refund agreed'\n" +
			"  oncekey approve ok1_3f2a… --tenant acme --episode 2 --by ada\n" +
			"  oncekey approve ok1_3f2a… --tenant acme --args '{\"order_id\":\"A-1\",\"amount_cents\":5000}' --reason 'half, as agreed'",
		Args: a.keyArgs("oncekey approve KEY --tenant T", "approvals"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.decide(cmd.Context(), kind, &f, args[0])
		},
	}
	if !approve {
		cmd.Use = "deny KEY --reason R [--tenant T] [--episode N] [--by NAME]"
		cmd.Short = "Deny a call that waits for approval: it fails as rejected and nothing runs"
		cmd.Long = "deny is approve's other half: it sends the approval workflow waiting on KEY a denial, with the --reason it\n" +
			"requires, and prints the workflow's answer. The waiting call fails as rejected, non-retryable; nothing runs, and a\n" +
			"repeat of the operation is denied again until the approval expires (the policy's retention).\n\n" +
			"--episode names the approval request the decision is for, as `oncekey approvals` prints it; left out, the pending\n" +
			"episode is read from the store."
		cmd.Long += "\n\n--message is what the model reads with the refusal (plain text, at most 500 bytes), kept apart from --reason,\n" +
			"which may hold operator detail and never reaches the model. --request-changes asks the model for other arguments\n" +
			"instead of telling it to stop (it needs --message, saying what to change); it is recorded as denied."
		cmd.Example = "  oncekey deny ok1_3f2a… --tenant acme --reason 'amount over the refund limit' --message 'Refunds over 100 EUR go through billing.'\n" +
			"  oncekey deny ok1_3f2a… --tenant acme --reason 'wrong order' --request-changes --message 'Use the order number, not the invoice number.'"
		cmd.Args = a.keyArgs("oncekey deny KEY --tenant T --reason WHY", "approvals")
	}
	fl := cmd.Flags()
	f.add(cmd)
	fl.Int64Var(&f.episode, "episode", 0, "the approval's episode `N` the decision is for, as oncekey approvals prints it (default: the pending one, read from the store)")
	if approve {
		fl.StringVar(&f.reason, "reason", "", "why; recorded with the approval")
		fl.StringVar(&f.args, "args", "", "approve with these arguments instead (`JSON`: one object, the tool's whole input); the edit runs as a new operation")
	} else {
		fl.StringVar(&f.reason, "reason", "", "why (required); recorded with the approval, never shown to the model")
		fl.BoolVar(&f.changes, "request-changes", false, "ask the model for other arguments instead of telling it to stop (needs --message)")
	}
	fl.StringVar(&f.message, "message", "", "what the model reads with the result (plain `text`, at most 500 bytes)")
	return cmd
}

// decision checks the flags and builds the Decision.
func (f *decideFlags) decision(a *app, kind reconcile.DecisionKind, keyArg string) (reconcile.Decision, string, error) {
	key := strings.TrimSpace(keyArg)
	verb := string(kind)
	if !strings.HasPrefix(key, oncekey.KeyPrefix) {
		return reconcile.Decision{}, "", fail(exitUsage, "%q is not an operation key (they start with %q); `oncekey approvals` lists the keys that wait", key, oncekey.KeyPrefix)
	}
	if kind == reconcile.Deny && strings.TrimSpace(f.reason) == "" {
		return reconcile.Decision{}, "", fail(exitUsage, "give --reason: a denial says why (it is recorded with the approval and shown by `oncekey show`)")
	}
	if f.changes {
		kind = reconcile.RequestChanges
		if strings.TrimSpace(f.message) == "" {
			return reconcile.Decision{}, "", fail(exitUsage, "give --message with --request-changes: it tells the model what to change")
		}
	}
	if p := oncekeystore.ModelMessageProblem(f.message); p != "" {
		return reconcile.Decision{}, "", fail(exitUsage, "--message %s; nothing was sent to %s", p, verb)
	}
	var args json.RawMessage
	if strings.TrimSpace(f.args) != "" {
		args = json.RawMessage(f.args)
		if err := (reconcile.Decision{Decision: reconcile.Approve, Arguments: args}).ValidateArguments(); err != nil {
			return reconcile.Decision{}, "", fail(exitUsage, "--args: %s; nothing was sent to approve", oneLine(err))
		}
	}
	if f.episode < 0 {
		return reconcile.Decision{}, "", fail(exitUsage, "--episode %d is not an episode: give the episode `oncekey approvals` prints, or leave it out for the pending one", f.episode)
	}
	by := f.defaults(a)
	if by == "" {
		by = "oncekey-cli"
	}
	for _, fl := range []struct {
		name, v string
		limit   int
	}{{"--reason", f.reason, reconcile.MaxNoteBytes}, {"--by", by, reconcile.MaxResolvedByBytes}, {"--tenant", f.tenant, reconcile.MaxResolvedByBytes}} {
		if p := textcheck.Problem(fl.v, fl.limit); p != "" {
			return reconcile.Decision{}, "", fail(exitUsage, "%s %s; nothing was sent to %s", fl.name, p, verb)
		}
	}
	return reconcile.Decision{Decision: kind, Tenant: f.tenant, Episode: f.episode, DecidedBy: by, Reason: f.reason,
		Message: f.message, Arguments: args}, key, nil
}

// decide runs `oncekey approve` or `oncekey deny`.
func (a *app) decide(ctx context.Context, kind reconcile.DecisionKind, f *decideFlags, keyArg string) error {
	d, key, err := f.decision(a, kind, keyArg)
	if err != nil {
		return err
	}
	if d.Episode == 0 {
		ep, err := a.pendingEpisode(ctx, kind, key, f)
		if err != nil {
			return err
		}
		d.Episode = ep
		a.where = nil // the messages that follow are about Temporal, not this database
	}
	if d, err = a.signDecision(ctx, f, key, d); err != nil {
		return err
	}
	a.where = nil
	return a.withTemporal(ctx, func(ctx context.Context, c client.Client) error {
		dctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		out, err := reconcile.Decide(dctx, c, key, d)
		id := reconcile.ApprovalWorkflowID(key)
		if err := a.decisionError(ctx, c, sentDecision{
			p: decisiontext.Approval, verb: string(kind), noun: decisionNoun(kind), key: key,
			show: a.showCommand(key, f.tenant), status: "pending, with the " + decisionNoun(kind) + " on its way", list: a.approvalsCommand(f.tenant),
			stored: func() error { return a.alreadyDecided(ctx, kind, key, f) },
			next:   fmt.Sprintf("`%s` lists what waits and `%s` shows the approval", a.approvalsCommand(f.tenant), a.showCommand(key, f.tenant)),
			refused: func(err error, reason string) error {
				var refused *reconcile.DecisionRefusedError
				if errors.As(err, &refused) && refused.DecidedAs != nil {
					return fail(exitFailed, "the approval of %s was decided before this %s was recorded: the workflow answered %s; nothing was recorded for this one; `%s` shows the approval",
						key, decisionNoun(kind), decisiontext.ApprovalAnswer(refused.DecidedAs, printable), a.showCommand(key, f.tenant))
				}
				if errors.Is(err, decisionsig.ErrRefused) {
					// Refused for its signature: the reason says what to sign it with.
					return fail(exitFailed, "%s", decisiontext.Approval.Refused(id, printable(oneLine(errors.New(reason)))))
				}
				if err := a.alreadyDecided(ctx, kind, key, f); err != nil {
					return err // why: another tenant's approval, or one decided already
				}
				return fail(exitFailed, "%s; `%s` shows each approval's tenant and episode",
					decisiontext.Approval.Refused(id, printable(oneLine(errors.New(reason)))), a.db(shell.Approvals().Flag("--status", "all")))
			},
			noNamespace: func(err error) error {
				if err := a.alreadyDecided(ctx, kind, key, f); err != nil {
					return err
				}
				return a.noNamespace(err)
			},
		}, err); err != nil {
			return err
		}
		if out.Waiting() {
			// A partial approval: the request needs more signers (ApprovalPolicy.Signers).
			fmt.Fprintf(a.stdout, "approval of %s recorded, episode %d (%s accepted it)\n", key, d.Episode, id)
			fmt.Fprintf(a.stdout, "the workflow answered: %s; the call does not run until another signer the workers trust approves it\n",
				decisiontext.ApprovalAnswer(out, printable))
			return nil
		}
		fmt.Fprintf(a.stdout, "%s %s, episode %d (%s accepted it)\n", pastTense(kind), key, d.Episode, id)
		fmt.Fprintf(a.stdout, "the workflow answered: %s\n", decisiontext.ApprovalAnswer(out, printable))
		if out.EditedAs != "" {
			fmt.Fprintf(a.stdout, "the call runs with the edited arguments as %s; `%s` shows it once it ran\n", out.EditedAs, a.showCommand(out.EditedAs, f.tenant))
		}
		return nil
	})
}

// pendingEpisode reads the pending episode of key's approval from the store, for a decision
// given without --episode. No approval is exit 3, a decided one exit 1 (there is nothing to
// decide), one asked in another namespace exit 2 (the command with --namespace), a store that
// cannot be read says to give --episode.
func (a *app) pendingEpisode(ctx context.Context, kind reconcile.DecisionKind, key string, f *decideFlags) (int64, error) {
	const give = "give --episode N, as `oncekey approvals` prints it, to decide without reading the store"
	s, closeStore, err := a.store(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w; %s", err, give)
	}
	defer closeStore()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	ap, err := s.GetApproval(gctx, &oncekeystore.GetParams{Tenant: f.tenant, OperationKey: key})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		if err := a.otherTenant(gctx, s, kind, key, f); err != nil {
			return 0, err
		}
		return 0, a.approvalNotFound(key, f.tenant, f.tenantGiven)
	case err != nil:
		return 0, fmt.Errorf("%w; %s", a.storeError(fmt.Sprintf("read the approval of %s (tenant %s)", key, f.tenant), err), give)
	case ap.Status != oncekeystore.ApprovalPending:
		return 0, decidedError(a, ap)
	case ap.Namespace != "" && ap.Namespace != a.ns():
		return 0, a.otherNamespace(ap, kind, f)
	}
	return ap.Episode, nil
}

// otherNamespace is the error of a decision sent to a namespace other than the one whose
// workflow asked for the approval: its approval workflow runs there. It names the command with
// --namespace.
func (a *app) otherNamespace(ap *oncekeystore.Approval, kind reconcile.DecisionKind, f *decideFlags) error {
	cmd := a.decideCommandWith(kind, ap.OperationKey, ap.Tenant, ap.Episode, ap.Namespace, f)
	return fail(exitUsage, "the approval of %s was asked by a workflow in namespace %s, and its approval workflow runs there, not in %s; nothing was sent: `%s`",
		ap.OperationKey, printable(ap.Namespace), printable(a.ns()), cmd)
}

// alreadyDecided looks key's approval up in the store, for a decision that found no approval
// workflow waiting or that the workflow refused: a decided approval is the answer, with who
// decided it and when (exit 1), another tenant's names that tenant (exit 1, see otherTenant), and
// a pending one asked in another namespace names that namespace (exit 2). It returns nil when
// the approval is pending here or cannot be read.
func (a *app) alreadyDecided(ctx context.Context, kind reconcile.DecisionKind, key string, f *decideFlags) error {
	tenant := f.tenant
	s, closeStore, err := a.store(ctx)
	if err != nil {
		a.where = nil
		return nil
	}
	defer closeStore()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	ap, err := s.GetApproval(gctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		if err := a.otherTenant(gctx, s, kind, key, f); err != nil {
			return err
		}
	case err != nil:
	case ap.Status != oncekeystore.ApprovalPending:
		return decidedError(a, ap)
	case ap.Namespace != "" && ap.Namespace != a.ns():
		return a.otherNamespace(ap, kind, f)
	}
	a.where = nil
	return nil
}

// decidedError says that ap is decided already, by whom and when: there is nothing to decide.
func decidedError(a *app, ap *oncekeystore.Approval) error {
	by := ""
	if ap.DecidedBy != "" {
		by = " by " + printable(ap.DecidedBy)
	}
	at := ""
	if !ap.DecidedAt.IsZero() {
		at = " at " + ap.DecidedAt.UTC().Format(time.RFC3339)
	}
	next := "nothing was sent"
	if ap.Status == oncekeystore.ApprovalTimedOut {
		next += "; the next call of the operation asks again, at episode " + strconv.FormatInt(ap.Episode+1, 10)
	}
	return fail(exitFailed, "the approval of %s (episode %d) is already %s%s%s: there is nothing to decide; %s; `%s` shows it",
		ap.OperationKey, ap.Episode, printable(strings.ReplaceAll(string(ap.Status), "_", " ")), by, at, next, a.showCommand(ap.OperationKey, ap.Tenant))
}

// approvalNotFound is the error of a decision for a key that has no approval under tenant.
func (a *app) approvalNotFound(key, tenant string, tenantGiven bool) error {
	list := a.db(shell.Approvals()).String()
	return a.notFound("approval", key, tenant, tenantGiven, list,
		"`"+list+"` lists what waits, with each approval's tenant: run again with --tenant set to it")
}

// decisionNoun names a decision of kind k: "approval" or "denial".
func decisionNoun(k reconcile.DecisionKind) string {
	if k == reconcile.Approve {
		return "approval"
	}
	return "denial"
}

func pastTense(k reconcile.DecisionKind) string {
	if k == reconcile.Approve {
		return "approved"
	}
	return "denied"
}

// decideCommand returns the `oncekey approve` or `oncekey deny` command for key, for messages,
// with the --address and --namespace this command used when they are not the defaults.
func (a *app) decideCommand(kind reconcile.DecisionKind, key, tenant string, episode int64) string {
	return a.decideCommandWith(kind, key, tenant, episode, a.ns(), nil)
}

// decideCommandWith is decideCommand in namespace ns, with the --reason and --by of f when f is
// not nil and they were given.
func (a *app) decideCommandWith(kind reconcile.DecisionKind, key, tenant string, episode int64, ns string, f *decideFlags) string {
	c := shell.Decide(string(kind), key, tenant)
	if episode > 0 {
		c.Int("--episode", episode)
	}
	a.withAddress(c)
	if ns != "default" || ns != a.ns() {
		c.Flag("--namespace", ns)
	}
	reason, by := "WHY", ""
	if f != nil {
		reason, by = f.reason, f.by
		if reason == "" && kind == reconcile.Deny {
			reason = "WHY"
		}
	}
	if reason != "" && (kind == reconcile.Deny || f != nil) {
		c.Flag("--reason", reason)
	}
	return a.db(c.FlagIf("--by", by)).String()
}

// otherTenant looks for key's approval under any tenant, for a decision whose tenant has none (a
// key digests its tenant, so it belongs to one): under another tenant it is refused, exit 1 as
// the workflow refuses it, naming that tenant with the command (the caller reads this store
// anyway). It returns nil when no tenant has it or the store cannot say. It pages through the
// approvals of every tenant (ListApprovals has no key filter), which a store keeps only until
// their retention ends.
func (a *app) otherTenant(ctx context.Context, s oncekeystore.ApprovalStore, kind reconcile.DecisionKind, key string, f *decideFlags) error {
	var found *oncekeystore.Approval
	_, _, err := listPages(math.MaxInt, func(n int, cursor string) ([]*oncekeystore.Approval, string, error) {
		res, err := s.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{Cursor: cursor, Limit: n})
		if err != nil {
			return nil, "", err
		}
		for _, ap := range res.Approvals {
			if ap.OperationKey == key && ap.Tenant != f.tenant {
				found = ap
				return nil, "", nil // stop: found
			}
		}
		return nil, res.Next, nil
	})
	if err != nil || found == nil {
		return nil
	}
	episode := found.Episode
	if found.Status != oncekeystore.ApprovalPending {
		episode = 0
	}
	defaulted := ""
	if !f.tenantGiven {
		defaulted = " (the tenant defaults to the namespace)"
	}
	return fail(exitFailed, "the approval of %s belongs to tenant %s, not %s%s: a decision names the operation's tenant, so nothing was recorded; `%s`",
		key, printable(found.Tenant), printable(f.tenant), defaulted, a.decideCommandWith(kind, key, found.Tenant, episode, a.ns(), f))
}
