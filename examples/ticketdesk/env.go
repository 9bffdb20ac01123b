package main

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

	"github.com/oncekey/oncekey/internal/devserver"
	"github.com/oncekey/oncekey/pgstore"
)

type postgres struct {
	pool   *pgxpool.Pool
	admin  *pgxpool.Pool
	schema string
	where  string
}

// openPostgres connects with DATABASE_URL, or the libpq variables when it is unset, creates a
// schema of its own and returns a pool whose search_path is that schema.
func openPostgres(ctx context.Context) (*postgres, error) {
	url := os.Getenv("DATABASE_URL")
	help := func(err error) error {
		return fmt.Errorf("cannot reach Postgres (%s).\n"+
			"Set DATABASE_URL=postgres://user@host:5432/db (add ?sslmode=disable for a local server without TLS),\n"+
			"or the libpq variables PGHOST, PGPORT, PGUSER, PGDATABASE (and PGPASSWORD if needed).\n"+
			"The demo creates its own schema in that database and drops it when it exits", strings.Join(strings.Fields(err.Error()), " "))
	}
	cfg, err := pgxpool.ParseConfig(url)
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
	schema := "ticketdesk_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(pctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create schema %s in %s: %w (the user needs CREATE on the database)", schema, where, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	pgstore.ConfigurePool(cfg, nil) // the server enforces statement timeouts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
		return nil, help(err)
	}
	return &postgres{pool: pool, admin: admin, schema: schema, where: where}, nil
}

// describeConn names a connection for people: "user root, database root on /var/run/postgresql".
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

func (p *postgres) close() {
	p.pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+p.schema+" CASCADE"); err != nil {
		fmt.Fprintf(os.Stderr, "ticketdesk: drop schema %s: %v\n", p.schema, err)
	}
	p.admin.Close()
}

type temporalConn struct {
	client    client.Client
	server    *testsuite.DevServer
	where     string
	addr      string
	namespace string
}

// openTemporal dials TEMPORAL_ADDRESS (namespace TEMPORAL_NAMESPACE, default "default"), or
// starts a dev server from the Temporal CLI when TEMPORAL_ADDRESS is unset.
func openTemporal(ctx context.Context, verbose bool) (*temporalConn, error) {
	var logger log.Logger = quietLogger{}
	if verbose {
		logger = nil // the SDK's default logger
	}
	ns := os.Getenv("TEMPORAL_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	if addr := os.Getenv("TEMPORAL_ADDRESS"); addr != "" {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: ns, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("cannot reach Temporal at TEMPORAL_ADDRESS=%s (%v); unset it to let the demo start a dev server", addr, err)
		}
		return &temporalConn{client: c, where: addr + " (TEMPORAL_ADDRESS), namespace " + ns, addr: addr, namespace: ns}, nil
	}
	var out io.Writer = io.Discard
	if verbose {
		out = os.Stderr
	}
	srv, addr, err := devserver.Start(ctx, devserver.Options{Logger: logger, Output: out})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server: %w", err)
	}
	bin := devserver.Binary()
	return &temporalConn{client: srv.Client(), server: srv, where: "dev server " + addr + " started from " + bin, addr: addr, namespace: "default"}, nil
}

func (t *temporalConn) close() {
	if t.server != nil {
		_ = t.server.Stop() // also closes the client
		return
	}
	t.client.Close()
}

// quietLogger drops the SDK's logs: with faults injected on purpose, its warnings would drown
// the report. Run with -v to see them.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
