package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey/pgstore"
)

func newMigrateCmd(a *app) *cobra.Command {
	var dryRun, check bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade oncekey's tables (idempotent; safe to run from several places at once); on Redis, check the server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !a.isPostgres() {
				// Redis keeps no schema: say so, after checking the server as every command does.
				return a.withStore(cmd.Context(), func(context.Context, recordStore) error {
					fmt.Fprintf(a.stdout, "%s needs no migration (redisstore keeps no schema; the server runs Redis 7 or later): nothing to apply\n", a.where)
					return nil
				})
			}
			return a.withPool(cmd.Context(), func(ctx context.Context, pool *pgxpool.Pool) error {
				switch {
				case check:
					if err := migrateDryRun(cmd, a, pool); err != nil {
						return err
					}
				case dryRun:
					return migrateDryRun(cmd, a, pool)
				default:
					if err := pgstore.MigrateSchema(ctx, pool, a.schema); err != nil {
						return a.storeError("migrate", err)
					}
					fmt.Fprintf(a.stdout, "migrations applied in %s; the schema is up to date\n", a.pg)
				}
				return warnDurability(ctx, a, pool, check)
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the migrations that would be applied, apply nothing")
	cmd.Flags().BoolVar(&check, "check", false, "print the migrations that would be applied and whether the server's durability settings keep oncekey's promise (fsync, synchronous_commit, synchronous standbys); apply nothing")
	return cmd
}

// migrateDryRun prints the migrations Migrate would apply.
func migrateDryRun(cmd *cobra.Command, a *app, pool *pgxpool.Pool) error {
	pending, err := pgstore.PendingMigrations(cmd.Context(), pool, a.schema)
	if err != nil {
		return a.storeError("migrate --dry-run", err)
	}
	if len(pending) == 0 {
		fmt.Fprintf(a.stdout, "dry run: %s is up to date; nothing to apply\n", a.pg)
		return nil
	}
	fmt.Fprintf(a.stdout, "dry run: would apply %d migration(s) in %s:\n", len(pending), a.pg)
	for _, m := range pending {
		fmt.Fprintln(a.stdout, "  "+m)
	}
	return nil
}

// warnDurability prints a warning for each of the server's settings that does not keep oncekey's
// promise through a crash or a failover (pgstore.DurabilityWarnings), to stderr; with all, also
// that it saw none, to stdout. A warning does not change the exit status; a failure to read the
// settings is reported and does, with all only.
func warnDurability(ctx context.Context, a *app, pool *pgxpool.Pool, all bool) error {
	warnings, err := pgstore.DurabilityWarnings(ctx, pool)
	if err != nil {
		if all {
			return a.storeError("migrate --check", err)
		}
		fmt.Fprintf(a.stderr, "oncekey: could not read the server's durability settings: %v\n", err)
		return nil
	}
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "warning: %s (docs/stores.md#failover)\n", w)
	}
	if all && len(warnings) == 0 {
		fmt.Fprintln(a.stdout, "durability: no setting seen that loses acknowledged commits in a crash or a failover (fsync, synchronous_commit, standbys streaming from this server); replicas this server does not show, and your failover policy, are not checked")
	}
	return nil
}
