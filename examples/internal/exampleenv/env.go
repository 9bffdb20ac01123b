// Package exampleenv gives the small example programs (examples/payments, examples/encryption)
// their services: Postgres from DATABASE_URL or the libpq variables in a schema of their own,
// dropped at exit, and Temporal from TEMPORAL_ADDRESS or a dev server they start. It is for the
// examples only; nothing outside examples/ imports it.
package exampleenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey/internal/devserver"
	"github.com/oncekey/oncekey/pgstore"
)

// TemporalCLIVersion is the Temporal CLI the Makefile installs (`make temporal`).
const TemporalCLIVersion = devserver.CLIVersion

// Postgres is a pool on a schema of its own. Close drops the schema.
type Postgres struct {
	// Pool has its search_path set to Schema.
	Pool   *pgxpool.Pool
	Schema string
	// Where names the database for people.
	Where string
	admin *pgxpool.Pool
}

// OpenPostgres connects with DATABASE_URL, or the libpq variables (PGHOST, PGUSER, …) when it is
// unset, creates the schema prefix_<8 hex digits> and returns a pool whose search_path is it.
// The error says which variables to set.
func OpenPostgres(ctx context.Context, prefix string) (*Postgres, error) {
	help := func(err error) error {
		return fmt.Errorf("cannot reach Postgres (%s); set DATABASE_URL=postgres://user@host:5432/db?sslmode=disable "+
			"or the libpq variables PGHOST, PGPORT, PGUSER, PGDATABASE", strings.Join(strings.Fields(err.Error()), " "))
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return nil, help(err)
	}
	db := cfg.ConnConfig.Database
	if db == "" {
		db = cfg.ConnConfig.User // the server's default
	}
	where := fmt.Sprintf("database %s as %s on %s:%d", db, cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	admin, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, help(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.Ping(pctx); err != nil {
		admin.Close()
		return nil, help(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := prefix + "_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(pctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create schema %s in %s: %w", schema, where, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pgstore.ConfigurePool(cfg, nil)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
		return nil, help(err)
	}
	return &Postgres{Pool: pool, Schema: schema, Where: where, admin: admin}, nil
}

// Close closes the pool and drops the schema.
func (p *Postgres) Close() error {
	p.Pool.Close()
	defer p.admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+p.Schema+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", p.Schema, err)
	}
	return nil
}

// Temporal is a client on TEMPORAL_ADDRESS or on a dev server this process started.
type Temporal struct {
	Client client.Client
	// HostPort is the frontend address; Where names it for people.
	HostPort, Where string
	server          *testsuite.DevServer
}

// OpenTemporal dials TEMPORAL_ADDRESS (namespace "default"), or starts a dev server from the
// Temporal CLI (ONCEKEY_TEMPORAL_BIN, else the build `make temporal` caches, else `temporal` on
// PATH) when it is unset.
func OpenTemporal(ctx context.Context) (*Temporal, error) {
	if addr := os.Getenv("TEMPORAL_ADDRESS"); addr != "" {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.DialContext(dctx, client.Options{HostPort: addr, Logger: Quiet{}})
		if err != nil {
			return nil, fmt.Errorf("cannot reach Temporal at TEMPORAL_ADDRESS=%s (%v); unset it to start a dev server", addr, err)
		}
		return &Temporal{Client: c, HostPort: addr, Where: addr + " (TEMPORAL_ADDRESS)"}, nil
	}
	srv, addr, err := devserver.Start(ctx, devserver.Options{Logger: Quiet{}})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server: %w", err)
	}
	return &Temporal{Client: srv.Client(), HostPort: addr, Where: "dev server " + addr, server: srv}, nil
}

// Close closes the client and stops the dev server if this process started one.
func (t *Temporal) Close() {
	if t.server != nil {
		_ = t.server.Stop()
		return
	}
	t.Client.Close()
}

func temporalBinary() string {
	if p := os.Getenv("ONCEKEY_TEMPORAL_BIN"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "oncekey", "temporal-"+TemporalCLIVersion, "temporal")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	return ""
}

// Quiet is a Temporal logger that drops everything: the examples inject faults on purpose, and
// the SDK's warnings about them would drown the output.
type Quiet struct{}

func (Quiet) Debug(string, ...any) {}
func (Quiet) Info(string, ...any)  {}
func (Quiet) Warn(string, ...any)  {}
func (Quiet) Error(string, ...any) {}

// Env is what an example program runs on: Postgres in a schema of its own and Temporal.
type Env struct {
	PG       *Postgres
	Temporal *Temporal
	name     string
	stderr   io.Writer
}

// Open opens Postgres (schema prefix name) and Temporal as OpenPostgres and OpenTemporal do and
// prints where each is to stdout. Errors name the program. Close releases both.
func Open(ctx context.Context, name string, stdout, stderr io.Writer) (*Env, error) {
	pg, err := OpenPostgres(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(stdout, "postgres: %s, schema %s (dropped at exit)\n", pg.Where, pg.Schema)
	tc, err := OpenTemporal(ctx)
	if err != nil {
		if cerr := pg.Close(); cerr != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, cerr)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(stdout, "temporal: %s\n", tc.Where)
	return &Env{PG: pg, Temporal: tc, name: name, stderr: stderr}, nil
}

// Close stops Temporal (or closes the client) and drops the Postgres schema; a failure to drop
// it is printed to stderr.
func (e *Env) Close() {
	e.Temporal.Close()
	if err := e.PG.Close(); err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", e.name, err)
	}
}
