package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PendingMigrations returns the embedded migrations that MigrateSchema(ctx, pool, schema) would
// apply, oldest first, as "NNN_name". It changes nothing and takes no lock. schema "" means the
// first schema of the connection's search_path. Errors are wrapped like Migrate's.
func PendingMigrations(ctx context.Context, pool *pgxpool.Pool, schema string) ([]string, error) {
	migs, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	table := "oncekey_migrations"
	if schema != "" {
		table = pgx.Identifier{schema, "oncekey_migrations"}.Sanitize()
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, poolerMode, table).Scan(&exists); err != nil {
		return nil, wrapErr("pending migrations", schema, err)
	}
	applied := map[int]bool{}
	if exists {
		if applied, err = appliedVersions(ctx, pool, table); err != nil {
			return nil, wrapErr("pending migrations", schema, err)
		}
	}
	return pendingOf(migs, applied), nil
}

// pendingOf names the migrations of migs not in applied, oldest first, as "NNN_name".
func pendingOf(migs []migration, applied map[int]bool) []string {
	var out []string
	for _, m := range migs {
		if !applied[m.version] {
			out = append(out, fmt.Sprintf("%03d_%s", m.version, m.name))
		}
	}
	return out
}
