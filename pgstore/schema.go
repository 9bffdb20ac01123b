package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

// schemaProblem is what is wrong with the store's table when Postgres says it is not what the
// store's statements expect.
type schemaProblem int

const (
	// tableMissing: the table (or the schema it is looked for in) does not exist.
	tableMissing schemaProblem = iota + 1
	// tableOutdated: the table exists but lacks a column or function this build's statements
	// use, or misses migrations this build embeds.
	tableOutdated
)

// schemaProblemOf reports whether err is Postgres saying that the store's table is missing or
// not at the migration this build expects: 42P01 undefined_table, 3F000 invalid_schema_name,
// 42703 undefined_column, 42883 undefined_function, and 23514 check_violation of the effect
// check (a Transactional claim before migration 005). These are configuration mistakes, never an
// unreachable store: retrying cannot fix them.
func schemaProblemOf(err error) (schemaProblem, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return 0, false
	}
	switch pgErr.Code {
	case "42P01", "3F000":
		return tableMissing, true
	case "42703", "42883":
		return tableOutdated, true
	case "23514":
		// The effect check refuses a class this build writes (Transactional, 4, before
		// migration 005): the store validates the effect before it sends it.
		if pgErr.ConstraintName == "oncekey_operations_effect_check" {
			return tableOutdated, true
		}
	}
	return 0, false
}

// wrap names the operation and classifies err: a missing or outdated table becomes
// *oncekeystore.StoreSchemaError (see schemaError), an unreachable database
// *oncekeystore.StoreUnavailableError (see wrapErr).
func (s *Store) wrap(ctx context.Context, op, key string, err error) error {
	problem, ok := schemaProblemOf(err)
	if !ok {
		return wrapErr(op, key, err)
	}
	return named(op, key, s.schemaError(ctx, op, problem, "", err))
}

// schemaSetting is what schemaError reads from the database to say where the store looked and
// where the table is instead.
type schemaSetting struct {
	database     string
	searchPath   string
	schemaExists bool
	holders      []string // schemas holding a table named oncekey_operations, sorted
}

// schemaSettingSQL reads schemaSetting; $1 is Options.Schema. It runs only on an error path.
const schemaSettingSQL = `SELECT current_database()::text, current_setting('search_path'),
    EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1),
    ARRAY(SELECT n.nspname::text FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relname = 'oncekey_operations' AND c.relkind IN ('r', 'p') ORDER BY 1)`

// schemaError builds the error for a table that is missing (or outdated, with detail saying
// how) where the store looks for it: which table, where it looked (Options.Schema, or the
// connection's search_path when Schema is ""), and what to do. It asks the database once more
// for the search_path and the schemas that do hold the table; if that fails too, the message
// goes without them.
func (s *Store) schemaError(ctx context.Context, op string, problem schemaProblem, detail string, dbErr error) *oncekeystore.StoreSchemaError {
	var set schemaSetting
	known := ctx.Err() == nil && s.call(ctx, func(ctx context.Context) error {
		return s.db().QueryRow(ctx, schemaSettingSQL, s.schema).Scan(&set.database, &set.searchPath, &set.schemaExists, &set.holders)
	}) == nil

	const table = "oncekey_operations"
	var where, reason string
	if s.schema == "" {
		where = "the connection's search_path"
		if known {
			where += " (" + set.searchPath + ")"
		}
	} else {
		where = "schema " + strconv.Quote(s.schema) + " (pgstore.Options.Schema)"
	}
	switch {
	case problem == tableMissing && s.schema == "":
		reason = fmt.Sprintf("table %s not found in %s, where the store looks when pgstore.Options.Schema is empty", table, where)
	case problem == tableMissing && known && !set.schemaExists:
		reason = fmt.Sprintf("table %s not found: %s does not exist", table, where)
	case problem == tableMissing:
		reason = fmt.Sprintf("table %s not found in %s", table, where)
	default:
		reason = fmt.Sprintf("table %s in %s is not at the migration this version of oncekey expects", table, where)
	}
	if detail != "" {
		reason += ": " + detail
	}

	migrate := "pgstore.Migrate / pgstore.MigrateSchema (or `oncekey migrate [--schema S]`)"
	if s.schema != "" {
		migrate = fmt.Sprintf("pgstore.MigrateSchema(ctx, pool, %q) (or `%s`)", s.schema, shell.Migrate().Flag("--schema", s.schema))
	}
	db := "this database"
	if known {
		db += " (" + set.database + ")"
	}
	fix := fmt.Sprintf("run %s on %s, or set pgstore.Options.Schema to the schema you migrated", migrate, db)
	if problem == tableMissing && known && len(set.holders) > 0 {
		const most = 5
		var quoted []string
		for _, h := range set.holders[:min(len(set.holders), most)] {
			quoted = append(quoted, strconv.Quote(h))
		}
		if len(set.holders) > most {
			quoted = append(quoted, fmt.Sprintf("%d more", len(set.holders)-most))
		}
		fix += fmt.Sprintf(" (%s has %s in schema %s)", db, table, strings.Join(quoted, ", "))
	}
	e := &oncekeystore.StoreSchemaError{Op: op, Table: s.table, Reason: reason, Fix: fix, Err: dbErr}
	if problem == tableMissing && known {
		e.Elsewhere = set.holders[:min(len(set.holders), 5)]
	}
	return e
}

// Check tells whether the store can work: that its table oncekey_operations exists where the
// store looks for it (Options.Schema, or the connection's search_path when Schema is "") and
// that the schema holding it has every migration this build embeds, as recorded in its
// oncekey_migrations table by Migrate and MigrateSchema. Migrations newer than this build knows
// are accepted (a newer build migrated the database; MigrateSchema leaves them alone too). It
// changes nothing and takes no lock.
//
// Call it once at startup, after migrating if the program migrates, so that a store given the
// wrong schema stops the program there instead of failing every tool call.
//
// It returns nil when the store is ready; an error wrapping *oncekeystore.StoreSchemaError when the
// table or its migrations table is missing or migrations are pending (its message names the
// table, where the store looked and what to do); an error wrapping
// *oncekeystore.StoreUnavailableError when Postgres cannot be reached; another error (insufficient
// privileges, say) otherwise.
func (s *Store) Check(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	var (
		found, tracked bool
		schema         string
		applied        map[int]bool
	)
	err = s.call(ctx, func(ctx context.Context) error {
		found, tracked, applied = false, false, map[int]bool{}
		err := s.db().QueryRow(ctx, `SELECT n.nspname::text,
    to_regclass(quote_ident(n.nspname) || '.oncekey_migrations') IS NOT NULL
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)`, s.table).Scan(&schema, &tracked)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if !tracked {
			return nil
		}
		applied, err = appliedVersions(ctx, s.pool, pgx.Identifier{schema, "oncekey_migrations"}.Sanitize())
		return err
	})
	if err != nil {
		return s.wrap(ctx, "check", "", err)
	}
	var problem error
	switch {
	case !found:
		problem = s.schemaError(ctx, "check", tableMissing, "", nil)
	case !tracked:
		problem = s.schemaError(ctx, "check", tableOutdated,
			fmt.Sprintf("schema %q has no oncekey_migrations table, so the table was not made by Migrate", schema), nil)
	default:
		if pending := pendingOf(migs, applied); len(pending) > 0 {
			problem = s.schemaError(ctx, "check", tableOutdated,
				fmt.Sprintf("migrations %s are not applied in schema %q", strings.Join(pending, ", "), schema), nil)
		}
	}
	if problem != nil {
		return fmt.Errorf("pgstore: check: %w", problem)
	}
	return nil
}
