package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded, versioned schema change.
type migration struct {
	version  int
	name     string
	up, down string
}

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.(up|down)\.sql$`)

// loadMigrations reads the embedded migrations, checking that versions run 1, 2, 3… and that
// every up file has a down file.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pgstore: migration file %q is not NNN_name.up.sql or NNN_name.down.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		mg := byVersion[v]
		if mg == nil {
			mg = &migration{version: v, name: m[2]}
			byVersion[v] = mg
		}
		if mg.name != m[2] {
			return nil, fmt.Errorf("pgstore: migration %03d has two names: %s and %s", v, mg.name, m[2])
		}
		if m[3] == "up" {
			mg.up = string(body)
		} else {
			mg.down = string(body)
		}
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migration versions must run 1, 2, 3…; found %03d at position %d", m.version, i+1)
		}
		if m.up == "" || m.down == "" {
			return nil, fmt.Errorf("pgstore: migration %03d_%s needs both an up and a down file", m.version, m.name)
		}
	}
	return out, nil
}

// Migrate brings oncekey's tables in the connection's search_path schema (normally public) up
// to the newest embedded migration. It is MigrateSchema(ctx, pool, "").
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return MigrateSchema(ctx, pool, "")
}

// MigrateSchema brings oncekey's tables in schema up to the newest embedded migration, creating
// the schema if it does not exist. schema "" means the first schema of the connection's
// search_path. The whole run is one transaction holding a transaction-level advisory lock keyed
// by the schema, so two processes migrating at once are safe: the second waits, then finds
// nothing to do. Applied versions are recorded in the table oncekey_migrations; versions newer
// than this binary knows are left alone. Use the same schema in Options.Schema. Its statements
// are never prepared, whatever the pool's mode, and nothing outlives the transaction, so it
// runs through a connection pooler in transaction mode (PgBouncer) as well.
func MigrateSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	err = underMigrationLock(ctx, pool, schema, func(tx querier, applied map[int]bool) error {
		for _, m := range migs {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.up); err != nil {
				return fmt.Errorf("apply %03d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO oncekey_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return wrapErr("migrate", schema, err)
	}
	return nil
}

// MigrateDownSchema rolls oncekey's tables in schema back to version to (0 removes them all),
// running the down files newest first under the same advisory lock as MigrateSchema. The
// migrations table itself is kept.
func MigrateDownSchema(ctx context.Context, pool *pgxpool.Pool, schema string, to int) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	if to < 0 || to > len(migs) {
		return fmt.Errorf("pgstore: migrate down: version %d is outside 0..%d", to, len(migs))
	}
	err = underMigrationLock(ctx, pool, schema, func(tx querier, applied map[int]bool) error {
		for i := len(migs) - 1; i >= 0; i-- {
			m := migs[i]
			if m.version <= to || !applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.down); err != nil {
				return fmt.Errorf("roll back %03d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM oncekey_migrations WHERE version = $1`, m.version); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return wrapErr("migrate down", schema, err)
	}
	return nil
}

// underMigrationLock runs fn in one transaction holding the migration lock for schema (see
// lockSchema), with the migrations table in place and the versions applied so far. Every
// statement goes in poolerMode (unprepared), so that a pooler in front of the pool does no harm.
func underMigrationLock(ctx context.Context, pool *pgxpool.Pool, schema string, fn func(tx querier, applied map[int]bool) error) error {
	return pgx.BeginFunc(ctx, pool, func(ptx pgx.Tx) error {
		tx := modeQuerier{q: ptx}
		if err := lockSchema(ctx, tx, schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS oncekey_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		applied, err := appliedVersions(ctx, tx, "oncekey_migrations")
		if err != nil {
			return err
		}
		return fn(tx, applied)
	})
}

// lockSchema takes the migration advisory lock for schema (held to the end of tx), creates the
// schema if it is named and missing, and points tx's search_path at it.
func lockSchema(ctx context.Context, tx querier, schema string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('oncekey.migrate:' || coalesce(nullif($1, ''), current_schema(), ''), 0))`, schema); err != nil {
		return err
	}
	if schema == "" {
		return nil
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident)
	return err
}

// appliedVersions reads the versions recorded in the migrations table (a sanitized, possibly
// schema-qualified name) through q: a transaction or a pool.
func appliedVersions(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) (map[int]bool, error) {
	rows, err := q.Query(ctx, "SELECT version FROM "+table)
	if err != nil {
		return nil, err
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	out := make(map[int]bool, len(vs))
	for _, v := range vs {
		out[int(v)] = true
	}
	return out, nil
}
