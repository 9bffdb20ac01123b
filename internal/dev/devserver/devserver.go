// Package devserver starts a local Temporal dev server from the Temporal CLI that `make temporal`
// installs. Tests and the example programs share it; it is not part of oncekey's API and must not
// import any oncekey package.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
)

// The Temporal build `make temporal` installs (docs/compatibility.md): one binary whose
// `server start-dev` is the dev server of Temporal CLI DevServerCLIVersion (Temporal server
// ServerVersion, standalone activities on) and whose every other subcommand is the full Temporal
// CLI CLIVersion (the full DevServerCLIVersion CLI cannot be built from the Go module proxy; see
// testdata/temporal/main.go).
const (
	DevServerCLIVersion = "v1.9.1"
	ServerVersion       = "v1.32.0"
	CLIVersion          = "v1.5.1"
)

// CacheDir is the directory under ~/.cache/oncekey that `make temporal` installs into; its name
// carries both versions, so a change of either is a new build, never a stale one.
const CacheDir = "temporal-devserver-" + DevServerCLIVersion + "-cli-" + CLIVersion

// Attempts is how many times Start tries before giving up. A dev server picks several free ports
// itself; when another process takes one of them first, the server dies at start-up, so Start
// tries again on fresh ports.
const Attempts = 3

// Binary returns the path of the Temporal CLI: ONCEKEY_TEMPORAL_BIN, else the build `make temporal`
// caches at ~/.cache/oncekey/<CacheDir>/temporal, else `temporal` on PATH. It returns "" when there
// is none. A `temporal` on PATH older than CLI v1.7.0 has no standalone activities, and tests that
// need them fail on it.
func Binary() string {
	if p := os.Getenv("ONCEKEY_TEMPORAL_BIN"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "oncekey", CacheDir, "temporal")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	return ""
}

// ErrNoCLI means no Temporal CLI was found; its message says how to get one.
var ErrNoCLI = errors.New("no Temporal CLI found: run `make temporal` (builds the dev server of Temporal CLI " + DevServerCLIVersion +
	" with the client commands of CLI " + CLIVersion + " into ~/.cache/oncekey/" + CacheDir +
	"), or set ONCEKEY_TEMPORAL_BIN to a temporal binary, or TEMPORAL_ADDRESS to a running server")

// Options configure Start. The zero value is usable.
type Options struct {
	// ExtraArgs are passed to `temporal server start-dev`.
	ExtraArgs []string
	// Logger is the client's logger. Defaults to one that drops everything.
	Logger log.Logger
	// Namespace is registered on start-up and used by the client. Defaults to "default".
	Namespace string
	// Output receives the server's stdout and stderr. Defaults to io.Discard.
	Output io.Writer
	// StartTimeout bounds each attempt. Defaults to 45s.
	StartTimeout time.Duration
}

// Start starts a dev server on a free loopback port and returns it with its frontend address.
// It returns ErrNoCLI when the CLI is missing, or the last start-up error after Attempts tries.
// Stop the server with its Stop method (which also closes its client).
func Start(ctx context.Context, opts Options) (*testsuite.DevServer, string, error) {
	bin := Binary()
	if bin == "" {
		return nil, "", ErrNoCLI
	}
	if opts.Logger == nil {
		opts.Logger = quiet{}
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 45 * time.Second
	}
	var lastErr error
	for attempt := 1; attempt <= Attempts; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, "", err
		}
		actx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
		srv, err := testsuite.StartDevServer(actx, testsuite.DevServerOptions{
			ExistingPath:  bin,
			ClientOptions: &client.Options{HostPort: addr, Namespace: opts.Namespace, Logger: opts.Logger},
			LogLevel:      "error",
			ExtraArgs:     opts.ExtraArgs,
			Stdout:        opts.Output,
			Stderr:        opts.Output,
		})
		cancel()
		if err == nil {
			return srv, addr, nil
		}
		lastErr = fmt.Errorf("start %s on %s (attempt %d of %d): %w", bin, addr, attempt, Attempts, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", lastErr
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("devserver: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// quiet drops the SDK client's logs.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
