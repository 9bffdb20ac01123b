package testenv

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/oncekey/oncekey/internal/dev/devserver"
)

// TemporalCLIVersion is the Temporal CLI version whose client commands the tests run (the dev
// server is devserver.DevServerCLIVersion's).
const TemporalCLIVersion = devserver.CLIVersion

// TemporalBinary returns the path of the Temporal CLI, or "" (see devserver.Binary).
func TemporalBinary() string { return devserver.Binary() }

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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, addr, err := devserver.Start(ctx, devserver.Options{
		ExtraArgs: []string{"--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=true", "--namespace", SecondNamespace},
		Logger:    quietLogger{},
	})
	if err != nil {
		return "", err
	}
	devServer = srv
	return addr, nil
}

// OwnTemporal starts a dev server for t alone, with extraArgs passed to `temporal server
// start-dev` (a dynamic config the shared server must not have, such as
// "--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=false"), stops it in
// t.Cleanup, and returns its frontend address (namespace "default"). It needs the Temporal CLI
// even when TEMPORAL_ADDRESS is set; without one it skips, or fails under CI (Missing).
func OwnTemporal(t testing.TB, extraArgs ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, addr, err := devserver.Start(ctx, devserver.Options{ExtraArgs: extraArgs, Logger: quietLogger{}})
	if err != nil {
		Missing(t, "temporal dev server with %v: %v", extraArgs, err)
	}
	t.Cleanup(func() { srv.Client().Close(); _ = srv.Stop() })
	return addr
}

// SecondNamespace is a second namespace of the test Temporal server, beside "default", for tests
// of what one namespace's workflows may do to another's records. The dev server Main starts
// registers it; on a server named by TEMPORAL_ADDRESS, TemporalIn registers it if it is missing.
const SecondNamespace = "oncekey-second"

// TemporalIn returns a client to the test Temporal server in namespace ns (registered if it is
// missing), with the given plugins, closed in t.Cleanup.
func TemporalIn(t testing.TB, ns string, plugins ...client.Plugin) client.Client {
	t.Helper()
	addr := TemporalHostPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := client.NewNamespaceClient(client.Options{HostPort: addr, Logger: quietLogger{}})
	if err != nil {
		Missing(t, "temporal at %s: %v", addr, err)
	}
	defer nc.Close()
	if _, err := nc.Describe(ctx, ns); err != nil {
		retention := 24 * time.Hour
		if err := nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(retention)}); err != nil {
			t.Fatalf("register namespace %s: %v", ns, err)
		}
	}
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger{}, Plugins: plugins})
	if err != nil {
		Missing(t, "temporal at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
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
		// The SDK's dev server keeps the client it checked readiness with open; close it first,
		// or it goes on dialing the stopped server (a goroutine goleak reports).
		devServer.Client().Close()
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
