package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey/pgstore"
)

func newMigrateCmd(a *app) *cobra.Command {
	var dryRun bool
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
				if dryRun {
					return migrateDryRun(cmd, a, pool)
				}
				if err := pgstore.MigrateSchema(ctx, pool, a.schema); err != nil {
					return a.storeError("migrate", err)
				}
				fmt.Fprintf(a.stdout, "migrations applied in %s; the schema is up to date\n", a.pg)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the migrations that would be applied, apply nothing")
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
