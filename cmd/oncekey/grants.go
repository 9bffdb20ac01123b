package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// grantView is a standing grant as the CLI prints it.
type grantView struct {
	ID         string                   `json:"id"`
	Namespace  string                   `json:"namespace"`
	Tenant     string                   `json:"tenant"`
	Tool       string                   `json:"tool"`
	WorkflowID string                   `json:"workflow_id,omitempty"`
	Rule       string                   `json:"rule,omitempty"`
	Status     oncekeystore.GrantStatus `json:"status"`
	CreatedBy  string                   `json:"created_by"`
	Reason     string                   `json:"reason,omitempty"`
	CreatedAt  time.Time                `json:"created_at"`
	ExpiresAt  time.Time                `json:"expires_at"`
	RevokedAt  *time.Time               `json:"revoked_at,omitempty"`
	RevokedBy  string                   `json:"revoked_by,omitempty"`
	// Signature and RevocationSignature are, with --trust, who signed the grant's making and its
	// revocation, verified (sign.go's verdict); absent when unsigned.
	Signature           *verdict `json:"signature,omitempty"`
	RevocationSignature *verdict `json:"revocation_signature,omitempty"`
}

// grantVerdicts re-verifies the signatures kept with g against tl (nil: named, unverified).
func grantVerdicts(tl *decisionsig.TrustList, g *oncekeystore.Grant) (made, revoked *verdict) {
	made = verdictOf(tl, g.Signature, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditGrant(tl, g)
	})
	revoked = verdictOf(tl, g.RevocationSignature, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditRevocation(tl, g)
	})
	return made, revoked
}

func grantViewOf(g *oncekeystore.Grant) *grantView {
	return &grantView{ID: g.ID, Namespace: g.Namespace, Tenant: g.Tenant, Tool: g.Tool, WorkflowID: g.WorkflowID, Rule: g.Rule,
		Status: g.Status, CreatedBy: g.CreatedBy, Reason: g.Reason, CreatedAt: g.CreatedAt.UTC(), ExpiresAt: g.ExpiresAt.UTC(),
		RevokedAt: timePtr(g.RevokedAt), RevokedBy: g.RevokedBy}
}

// by returns --by, else $USER, else oncekey-cli.
func (a *app) by(flag string) string {
	if flag != "" {
		return flag
	}
	if u := a.getenv("USER"); u != "" {
		return u
	}
	return "oncekey-cli"
}

// grantScope says what a grant covers, for one line: "IssueRefund of tenant acme (all workflows)
// where amount_cents <= 10000".
func grantScope(g *oncekeystore.Grant) string {
	s := cell(g.Tool) + " of tenant " + cell(g.Tenant) + " in namespace " + cell(g.Namespace)
	if g.WorkflowID != "" {
		s += ", workflow " + cell(g.WorkflowID) + " only"
	}
	if g.Rule != "" {
		s += ", where " + cell(g.Rule)
	}
	return s
}

func newGrantsCmd(a *app) *cobra.Command {
	var (
		status, tenant, tool, trust string
		asJSON                      bool
	)
	cmd := &cobra.Command{
		Use:   "grants [--tenant T] [--tool X] [--status active|revoked|expired|ended|all] [--trust FILE] [--json]",
		Short: "List standing grants (active ones by default); add and revoke them",
		Long: "grants lists the standing grants of the namespace, oldest first: a grant approves the calls of one tool ahead of\n" +
			"time, for one tenant (or one workflow of it), for the arguments its rule matches, until it expires or is revoked.\n" +
			"A call a grant covers runs without waiting for a person; its approval names the grant and who made it.\n" +
			"`oncekey grants add` makes one, `oncekey grants revoke ID` ends one. With --trust FILE (else " + trustListEnv + ")\n" +
			"it shows who signed each grant's making and revocation, verified against that trust list.",
		Example: "  oncekey grants\n" +
			"  oncekey grants --tenant acme --status all --json\n" +
			"  oncekey grants add IssueRefund --tenant acme --rule 'amount_cents <= 10000' --for 8h --reason \"holiday returns\"\n" +
			"  oncekey grants revoke g1_…",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st oncekeystore.GrantStatus
			switch strings.ToLower(strings.TrimSpace(status)) {
			case "", "active":
				st = oncekeystore.GrantActive
			case "all":
			case "revoked", "expired", "ended":
				st = oncekeystore.GrantStatus(strings.ToLower(strings.TrimSpace(status)))
			default:
				return fail(exitUsage, "--status %q is not one of active, revoked, expired, ended, all", status)
			}
			tl, err := a.trustList(trust)
			if err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				gs, err := allGrants(ctx, s, &oncekeystore.ListGrantsParams{Namespace: a.ns(), Tenant: tenant, Tool: tool, Status: st, Limit: grantPage})
				if err != nil {
					return a.storeError("grants", err)
				}
				if asJSON {
					views := make([]*grantView, 0, len(gs))
					for _, g := range gs {
						v := grantViewOf(g)
						if tl != nil {
							v.Signature, v.RevocationSignature = grantVerdicts(tl, g)
						}
						views = append(views, v)
					}
					return writeJSON(a.stdout, views)
				}
				if len(gs) == 0 {
					fmt.Fprintf(a.stdout, "no grants match in namespace %s (--status all lists revoked and expired ones too); `%s` makes one\n",
						shell.Word(a.ns()), a.db(shell.Cmd("oncekey", "grants", "add").Arg("TOOL").Flag("--tenant", "T").Flag("--for", "8h")))
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "GRANT\tSTATUS\tTENANT\tTOOL\tWORKFLOW\tRULE\tBY\tEXPIRES\tREASON")
				for _, g := range gs {
					wf, rule := g.WorkflowID, g.Rule
					if wf == "" {
						wf = "(all)"
					}
					if rule == "" {
						rule = "(every call)"
					}
					exp := until(g.ExpiresAt)
					if g.Status == oncekeystore.GrantRevoked {
						exp = "revoked by " + cell(g.RevokedBy) + " " + age(g.RevokedAt)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Status, cell(g.Tenant), cell(g.Tool), cell(wf), cell(rule),
						cell(g.CreatedBy), exp, cell(g.Reason))
				}
				if err := tw.Flush(); err != nil || tl == nil {
					return err
				}
				for _, g := range gs {
					made, revoked := grantVerdicts(tl, g)
					line := g.ID + ": made " + signedText(made)
					if g.Status == oncekeystore.GrantRevoked {
						line += "; revoked " + signedText(revoked)
					}
					fmt.Fprintln(a.stdout, line)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "active", "only this status: active, revoked, expired, ended (revoked or expired), or all")
	f.StringVar(&tenant, "tenant", "", "only this tenant (default: all)")
	f.StringVar(&tool, "tool", "", "only this tool (activity type, matched exactly)")
	f.BoolVar(&asJSON, "json", false, "print the grants as a JSON array")
	f.StringVar(&trust, "trust", "", "the trust list `FILE` to verify who signed each grant and revocation (default: "+trustListEnv+")")
	cmd.AddCommand(newGrantAddCmd(a), newGrantRevokeCmd(a))
	return cmd
}

func newGrantAddCmd(a *app) *cobra.Command {
	var (
		tenant, workflow, rule, by, reason string
		dur                                time.Duration
		sign                               deciderFlags
	)
	cmd := &cobra.Command{
		Use:   "add TOOL [--tenant T] [--workflow ID] [--rule 'PATH OP VALUE and …'] --for DURATION [--by NAME] [--reason WHY]",
		Short: "Approve a tool's calls ahead of time, for one tenant or workflow, for a while",
		Long: "add makes a standing grant: from now until --for has passed (on the database clock), every call of TOOL in the\n" +
			"namespace and tenant (and, with --workflow, that workflow only) whose arguments match --rule is approved without\n" +
			"waiting, decided by --by. A rule compares dotted paths of the arguments the tool receives with JSON values, joined\n" +
			"by `and`: 'amount_cents <= 10000 and currency == \"EUR\"' (==, != for any value; <, <=, >, >= for numbers). The CLI\n" +
			"checks its syntax; the worker checks it against the tool's input type and a rule that does not fit covers nothing.",
		Example: "  oncekey grants add IssueRefund --tenant acme --rule 'amount_cents <= 10000' --for 8h --reason \"holiday returns\"\n" +
			"  oncekey grants add CreateTicket --workflow support-run-42 --for 30m",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tenant == "" {
				tenant = a.ns()
			}
			p := &oncekeystore.CreateGrantParams{Namespace: a.ns(), Tenant: tenant, Tool: args[0], WorkflowID: workflow, Rule: rule,
				CreatedBy: a.by(by), Reason: reason, Duration: dur}
			if err := p.Validate(); err != nil {
				var inv *oncekeystore.InvalidParamsError
				if errors.As(err, &inv) {
					flag := map[string]string{"Rule": "--rule", "Duration": "--for", "Tool": "TOOL", "Tenant": "--tenant", "WorkflowID": "--workflow",
						"CreatedBy": "--by", "Reason": "--reason", "Namespace": "--namespace"}[inv.Field]
					return fail(exitUsage, "%s: %s; nothing was granted", flag, inv.Reason)
				}
				return fail(exitUsage, "%v", err)
			}
			signer, err := a.signer(&sign)
			if err != nil {
				return err
			}
			if signer != nil {
				signed, err := reconcile.SignGrant(signer, *p)
				if err != nil {
					return fail(exitUsage, "--for: %s; nothing was granted", oneLine(err))
				}
				p = &signed
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				g, err := s.CreateGrant(ctx, p)
				if err != nil {
					return a.storeError("grants add", err)
				}
				fmt.Fprintf(a.stdout, "granted %s: %s, until %s (%s); revoke with `%s`\n", g.ID, grantScope(g),
					g.ExpiresAt.UTC().Format(time.RFC3339), until(g.ExpiresAt), a.db(shell.Cmd("oncekey", "grants", "revoke").Arg(g.ID)))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the tenant whose calls it covers (default: the namespace, as the interceptor's default tenant)")
	f.StringVar(&workflow, "workflow", "", "cover only this workflow's calls (default: every workflow of the tenant)")
	f.StringVar(&rule, "rule", "", "the condition on the arguments (default: every call of the tool)")
	f.DurationVar(&dur, "for", 0, "how long the grant lasts, e.g. 30m or 8h (required; at most 2160h, 90 days)")
	f.StringVar(&by, "by", "", "who grants (default: $USER, else oncekey-cli); recorded as who decided each call it covers")
	f.StringVar(&reason, "reason", "", "why; shown with the grant")
	sign.addSignKey(cmd)
	return cmd
}

func newGrantRevokeCmd(a *app) *cobra.Command {
	var (
		by   string
		sign deciderFlags
	)
	cmd := &cobra.Command{
		Use:   "revoke GRANT [--by NAME] [--sign-key FILE]",
		Short: "Revoke a standing grant: from now on it covers nothing",
		Long: "revoke ends a grant at once: no call is approved under it from now on, and a call approved under it that has not\n" +
			"run yet (a retry) asks a person again. A call whose effect had already started is not stopped. With --sign-key (else\n" +
			signKeyEnv + ") the revocation is signed and the signature kept with the grant, so `oncekey grants --trust` proves who\n" +
			"revoked it; workers with a trust list report a revocation no trusted key signed (the grant covers nothing all the same).",
		Example: "  oncekey grants revoke g1_0123…",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			signer, err := a.signer(&sign)
			if err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				g, err := s.GetGrant(ctx, args[0])
				if err == nil && g.Status == oncekeystore.GrantActive {
					p := oncekeystore.RevokeGrantParams{ID: args[0], RevokedBy: a.by(by)}
					if signer != nil {
						if p, err = reconcile.SignRevocation(signer, g, p); err != nil {
							return fail(exitUsage, "sign the revocation: %s; nothing was revoked", oneLine(err))
						}
					}
					g, err = s.RevokeGrant(ctx, &p)
				}
				switch {
				case errors.Is(err, oncekeystore.ErrNotFound):
					return fail(exitNotFound, "no grant %s in %s; `%s` lists them", cell(args[0]), a.where,
						a.db(shell.Cmd("oncekey", "grants").Flag("--status", "all")))
				case err != nil:
					return a.storeError("grants revoke", err)
				case g.Status == oncekeystore.GrantExpired:
					return fail(exitFailed, "the grant %s expired at %s: it covers nothing already; nothing was changed", g.ID, g.ExpiresAt.UTC().Format(time.RFC3339))
				case g.Status == oncekeystore.GrantRevoked && g.RevokedBy != a.by(by):
					// Revoked by someone else, before this command or while it ran.
					return fail(exitFailed, "the grant %s was already revoked by %s at %s; nothing was changed", g.ID, cell(g.RevokedBy), g.RevokedAt.UTC().Format(time.RFC3339))
				}
				fmt.Fprintf(a.stdout, "revoked %s (%s) by %s at %s: it covers nothing from now on\n", g.ID, grantScope(g), cell(g.RevokedBy),
					g.RevokedAt.UTC().Format(time.RFC3339))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who revokes (default: $USER, else oncekey-cli)")
	sign.addSignKey(cmd)
	return cmd
}

// grantPage is the page size in which the CLI reads grants.
const grantPage = 1000

// allGrants returns every grant ListGrants lists for p, page after page.
func allGrants(ctx context.Context, s oncekeystore.GrantStore, p *oncekeystore.ListGrantsParams) ([]*oncekeystore.Grant, error) {
	var all []*oncekeystore.Grant
	for {
		res, err := s.ListGrants(ctx, p)
		if err != nil {
			return all, err
		}
		all = append(all, res.Grants...)
		if res.Next == "" {
			return all, nil
		}
		p.Cursor = res.Next
	}
}

// signedText is "signed by V" for a verdict, "unsigned" for none.
func signedText(v *verdict) string {
	if v == nil {
		return "unsigned"
	}
	return "signed by " + v.String()
}
