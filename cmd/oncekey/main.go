// Command oncekey is the operator CLI for oncekey's records: apply migrations, list and inspect
// operations, resolve an operation whose outcome is unknown, list, approve and deny the calls
// that wait for approval, purge expired records, erase a tenant, and serve the operator inbox (a
// web page of what waits for a person).
//
// The store is the one --store names (postgres://… or redis://…?prefix=…), else ONCEKEY_STORE,
// else Postgres from --database-url, else DATABASE_URL, else the libpq variables (PGHOST,
// PGPORT, PGUSER, PGDATABASE, PGPASSWORD, …). This command is a module of its own (it links
// redisstore, and so go-redis, which the core module does not): install it from a clone with
// `go install -C cmd/oncekey .`. Temporal (for resolve, approve, deny and serve)
// with --address, else TEMPORAL_ADDRESS, else 127.0.0.1:7233; namespace --namespace, else
// TEMPORAL_NAMESPACE, else "default".
//
// Exit codes:
//
//	0  success
//	1  the operation failed (a store or server error, a record in the wrong state)
//	2  usage: unknown command or flag, missing or conflicting flags, malformed input
//	3  not found: no such record or approval, or no reconciliation or approval workflow waiting for
//	   the key
//	4  unreachable: the store (Postgres or Redis) or the Temporal server could not be reached (an
//	   outage: try again)
//	5  configuration: the store refused the credentials: Postgres the role, the password or the
//	   database name, Redis the user or password (retrying cannot help: fix the URL or the libpq
//	   variables)
//	6  delivered, not confirmed: resolve, approve or deny handed the decision to its workflow, which
//	   did not answer in time (no worker polls its task queue, or it is busy); the decision lands
//	   once a worker runs it, and sending it again is not needed
//
// Every error of a command that connected to the store names where: for Postgres the server,
// role, database and schema; for Redis the server, database number and key prefix.
//
// Every command and flag: https://github.com/oncekey/oncekey/blob/main/docs/cli.md
// In production: https://github.com/oncekey/oncekey/blob/main/docs/operating.md
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitUnreachable = 4
	exitConfig      = 5
	exitUnconfirmed = 6
)

// exitError carries an exit code with the one line printed for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// execute runs the CLI with args and returns the exit code. getenv reads the environment.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	cmd := newRootCmd(a)
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage // cobra's own errors: unknown command or flag, wrong argument count
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	msg := err.Error()
	if a.where != nil && !strings.Contains(msg, a.where.String()) {
		msg += " (" + a.where.String() + ")"
	}
	fmt.Fprintf(stderr, "oncekey: %s\n", msg)
	return code
}
