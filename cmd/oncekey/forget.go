package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

func newForgetCmd(a *app) *cobra.Command {
	var (
		tenant       string
		yes          bool
		allowMissing bool
	)
	cmd := &cobra.Command{
		Use:   "forget --tenant T --yes [--allow-missing]",
		Short: "Delete every record of one tenant (for erasure requests); late duplicates are then no longer refused",
		Long: "forget deletes every record of the tenant, tombstones included, its approvals and its standing grants; it cannot be undone.\n" +
			"The grants are ended, active ones included: from then on every call of the tenant that needs approval waits for a person.\n\n" +
			"A tenant with no records is an error (exit 3), so a mistyped tenant does not pass for an erasure done;\n" +
			"--allow-missing makes it succeed (exit 0), for scripts that erase a tenant that may already be gone.",
		Example: "  oncekey forget --tenant acme            # counts the records, deletes nothing\n" +
			"  oncekey forget --tenant acme --yes\n" +
			"  oncekey forget --tenant acme --yes --allow-missing   # idempotent: exit 0 when acme has no records",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(tenant) == "" {
				return fail(exitUsage, "--tenant is required")
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				none := func() error {
					if allowMissing {
						fmt.Fprintf(a.stdout, "tenant %s has no records in %s: nothing to delete (--allow-missing)\n", strconv.Quote(tenant), a.where)
						return nil
					}
					return fail(exitNotFound, "tenant %s has no records in %s: nothing to delete; `%s` lists the tenants that have (add --allow-missing where no records is fine)",
						strconv.Quote(tenant), a.where, a.db(shell.Cmd("oncekey", "stats")).Switch("--json"))
				}
				if !yes {
					rows, err := s.Stats(ctx, tenant)
					if err != nil {
						return a.storeError("forget", err)
					}
					var n int64
					for _, r := range rows {
						n += r.Count
					}
					aps, _, err := listApprovals(ctx, s, oncekeystore.ListApprovalsParams{Tenant: tenant}, math.MaxInt)
					if err != nil {
						return a.storeError("forget", err)
					}
					gs, err := allGrants(ctx, s, &oncekeystore.ListGrantsParams{Tenant: tenant, Limit: grantPage})
					if err != nil {
						return a.storeError("forget", err)
					}
					if n == 0 && len(aps) == 0 && len(gs) == 0 {
						return none()
					}
					return fail(exitUsage, "refusing without --yes: this deletes all %d record(s)%s%s of tenant %s, tombstones included, and cannot be undone",
						n, andApprovals(int64(len(aps))), andGrants(int64(len(gs))), strconv.Quote(tenant))
				}
				res, err := s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: tenant})
				if err != nil {
					return a.storeError("forget", err)
				}
				if res.Deleted == 0 && res.ApprovalsDeleted == 0 && res.GrantsDeleted == 0 {
					return none()
				}
				fmt.Fprintf(a.stdout, "deleted %d record(s)%s%s of tenant %s in %s\n", res.Deleted, andApprovals(res.ApprovalsDeleted), andGrants(res.GrantsDeleted),
					strconv.Quote(tenant), a.where)
				if res.GrantsDeleted > 0 {
					fmt.Fprintf(a.stdout, "the tenant's standing grants are ended and gone: its calls that need approval wait for a person\n")
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant to erase (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete")
	cmd.Flags().BoolVar(&allowMissing, "allow-missing", false, "succeed (exit 0) when the tenant has no records")
	return cmd
}

// andApprovals is forget's words for a tenant's n approvals, "" when it has none.
func andApprovals(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d approval(s)", n)
}

// andGrants is forget's words for a tenant's n standing grants, "" when it has none.
func andGrants(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d standing grant(s)", n)
}
