// Package exampleenv gives the example programs (examples/ticketdesk, examples/agentloop,
// examples/payments, examples/encryption) their services: Postgres from DATABASE_URL or the
// libpq variables in a schema of their own, dropped at exit, and Temporal from TEMPORAL_ADDRESS
// or a dev server they start. It is for the examples only; nothing outside examples/ imports it.
package exampleenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey/internal/dev/devserver"
	"github.com/oncekey/oncekey/pgstore"
)

// Options tune Open, OpenPostgres and OpenTemporal. The zero value suits a small example.
type Options struct {
	// MaxConns is the size of the pool; 0 leaves pgxpool's default.
	MaxConns int32
	// Verbose gives the Temporal client the SDK's default logger and sends the dev server's
	// output to stderr; otherwise both are dropped (see Quiet).
	Verbose bool
}

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
// unset, creates the schema prefix_<8 hex digits> and returns a pool of opts.MaxConns
// connections whose search_path is it. The error says which variables to set.
func OpenPostgres(ctx context.Context, prefix string, opts Options) (*Postgres, error) {
	help := func(err error) error {
		return fmt.Errorf("cannot reach Postgres (%s).\n"+
			"Set DATABASE_URL=postgres://user@host:5432/db (add ?sslmode=disable for a local server without TLS),\n"+
			"or the libpq variables PGHOST, PGPORT, PGUSER, PGDATABASE (and PGPASSWORD if needed).\n"+
			"The program creates a schema of its own in that database and drops it when it exits", strings.Join(strings.Fields(err.Error()), " "))
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return nil, help(err)
	}
	where := describeConn(cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
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
		return nil, fmt.Errorf("create schema %s in %s: %w (the user needs CREATE on the database)", schema, where, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pgstore.ConfigurePool(cfg, nil) // the server enforces statement timeouts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
		return nil, help(err)
	}
	return &Postgres{Pool: pool, Schema: schema, Where: where, admin: admin}, nil
}

// describeConn names a connection for people: "database root as root on 127.0.0.1:5432", or
// "… on unix socket in /var/run/postgresql".
func describeConn(user, host string, port uint16, db string) string {
	if db == "" {
		db = user // the server's default
	}
	where := fmt.Sprintf("%s:%d", host, port)
	if strings.HasPrefix(host, "/") {
		where = "unix socket in " + host
	}
	return fmt.Sprintf("database %s as %s on %s", db, user, where)
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
	// HostPort is the frontend address and Namespace the client's namespace, for pointing the
	// oncekey and temporal CLIs at the same server; Where names both for people.
	HostPort, Namespace, Where string
	server                     *testsuite.DevServer
}

// OpenTemporal dials TEMPORAL_ADDRESS in the namespace TEMPORAL_NAMESPACE (default "default"),
// or, when TEMPORAL_ADDRESS is unset, starts a dev server (namespace "default") from the
// Temporal CLI that devserver.Binary finds.
func OpenTemporal(ctx context.Context, opts Options) (*Temporal, error) {
	var logger log.Logger = Quiet{}
	if opts.Verbose {
		logger = nil // the SDK's default logger
	}
	if addr := os.Getenv("TEMPORAL_ADDRESS"); addr != "" {
		ns := os.Getenv("TEMPORAL_NAMESPACE")
		if ns == "" {
			ns = "default"
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: ns, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("cannot reach Temporal at TEMPORAL_ADDRESS=%s (%v); unset it to have a dev server started", addr, err)
		}
		return &Temporal{Client: c, HostPort: addr, Namespace: ns, Where: addr + " (TEMPORAL_ADDRESS), namespace " + ns}, nil
	}
	var out io.Writer = io.Discard
	if opts.Verbose {
		out = os.Stderr
	}
	srv, addr, err := devserver.Start(ctx, devserver.Options{Logger: logger, Output: out})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server: %w", err)
	}
	return &Temporal{Client: srv.Client(), HostPort: addr, Namespace: "default",
		Where: "dev server " + addr + " started from " + devserver.Binary(), server: srv}, nil
}

// Close closes the client and stops the dev server if this process started one.
func (t *Temporal) Close() {
	if t.server != nil {
		_ = t.server.Stop() // also closes the client
		return
	}
	t.Client.Close()
}

// Quiet is a Temporal logger that drops everything: the examples inject faults on purpose, and
// the SDK's warnings about them would drown the output. Options.Verbose shows them instead.
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

// Open opens Postgres (schema prefix name) and Temporal as OpenPostgres and OpenTemporal do with
// opts and prints where each is to stdout. Errors name the program. Close releases both.
func Open(ctx context.Context, name string, opts Options, stdout, stderr io.Writer) (*Env, error) {
	pg, err := OpenPostgres(ctx, name, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(stdout, "postgres: %s, schema %s (dropped at exit)\n", pg.Where, pg.Schema)
	tc, err := OpenTemporal(ctx, opts)
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
