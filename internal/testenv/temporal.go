package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
)

// TemporalCLIVersion is the Temporal CLI version the project's dev server runs.
const TemporalCLIVersion = "v1.5.1"

// TemporalBinary returns the path of the Temporal CLI: ONCEKEY_TEMPORAL_BIN, else the cached
// build at ~/.cache/oncekey/temporal-<version>/temporal, else `temporal` on PATH. It returns ""
// when none exists.
func TemporalBinary() string {
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

var (
	devMu     sync.Mutex
	devServer *testsuite.DevServer
	devAddr   string
	devErr    error
)

// TemporalHostPort returns the address of a Temporal frontend for tests: TEMPORAL_ADDRESS if set,
// else a dev server started once per test binary (stopped by Main).
func TemporalHostPort(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("TEMPORAL_ADDRESS"); a != "" {
		return a
	}
	devMu.Lock()
	defer devMu.Unlock()
	if devAddr == "" && devErr == nil {
		devAddr, devErr = startDevServer()
	}
	if devErr != nil {
		Missing(t, "temporal dev server: %v", devErr)
	}
	return devAddr
}

func startDevServer() (string, error) {
	bin := TemporalBinary()
	if bin == "" {
		return "", fmt.Errorf("no Temporal CLI: run `make temporal` (installs %s under ~/.cache/oncekey) or set ONCEKEY_TEMPORAL_BIN or TEMPORAL_ADDRESS", TemporalCLIVersion)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  bin,
		ClientOptions: &client.Options{HostPort: addr, Namespace: "default", Logger: quietLogger{}},
		LogLevel:      "error",
		ExtraArgs: []string{
			"--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=true",
		},
		Stdout: io.Discard,
		Stderr: os.Stderr,
	})
	if err != nil {
		return "", fmt.Errorf("start %s: %w", bin, err)
	}
	devServer = srv
	return addr, nil
}

// Temporal returns a client to the test Temporal server in namespace "default", closed in
// t.Cleanup.
func Temporal(t testing.TB) client.Client {
	t.Helper()
	addr := TemporalHostPort(t)
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: "default", Logger: quietLogger{}})
	if err != nil {
		Missing(t, "temporal at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Main runs the tests and stops the dev server, if one was started. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs the tests, stops the dev server if one was started, and returns the exit code, for a
// TestMain that has more to do (print a report) before it exits.
func Run(m *testing.M) int {
	code := m.Run()
	devMu.Lock()
	if devServer != nil {
		_ = devServer.Stop()
	}
	devMu.Unlock()
	return code
}

// quietLogger drops the SDK's client logs, which would drown test output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
