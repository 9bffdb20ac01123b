package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	tinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// WorkerConfig configures a worker of the suite. In a child process it comes from the
// environment (Env, ConfigFromEnv).
type WorkerConfig struct {
	// Name identifies the worker in reported events.
	Name string
	// TemporalAddress is the frontend's host:port.
	TemporalAddress string
	// DatabaseURL reaches the Postgres schema holding oncekey's table (search_path set).
	DatabaseURL string
	// Downstream is the fake downstream's base URL.
	Downstream string
	// TaskQueues are the task queues polled, each by its own Temporal worker.
	TaskQueues []string
	// Lease is every claimed tool's lease. Defaults to 2s.
	Lease time.Duration
	// Hooks turns on the PointClaimed, PointBody and PointCompleted hooks.
	Hooks bool
}

// Environment variables of a child worker.
const (
	EnvName       = "FAULTS_WORKER_NAME"
	EnvTemporal   = "FAULTS_TEMPORAL_ADDRESS"
	EnvDatabase   = "FAULTS_DATABASE_URL"
	EnvDownstream = "FAULTS_DOWNSTREAM"
	EnvTaskQueues = "FAULTS_TASK_QUEUES"
	EnvLease      = "FAULTS_LEASE"
	EnvHooks      = "FAULTS_HOOKS"
)

// Env returns c as environment variables for a child worker.
func (c WorkerConfig) Env() []string {
	return []string{
		EnvName + "=" + c.Name,
		EnvTemporal + "=" + c.TemporalAddress,
		EnvDatabase + "=" + c.DatabaseURL,
		EnvDownstream + "=" + c.Downstream,
		EnvTaskQueues + "=" + strings.Join(c.TaskQueues, ","),
		EnvLease + "=" + c.Lease.String(),
		EnvHooks + "=" + strconv.FormatBool(c.Hooks),
	}
}

// ConfigFromEnv reads a WorkerConfig written by Env.
func ConfigFromEnv(getenv func(string) string) (WorkerConfig, error) {
	c := WorkerConfig{
		Name:            getenv(EnvName),
		TemporalAddress: getenv(EnvTemporal),
		DatabaseURL:     getenv(EnvDatabase),
		Downstream:      getenv(EnvDownstream),
	}
	if q := getenv(EnvTaskQueues); q != "" {
		c.TaskQueues = strings.Split(q, ",")
	}
	if s := getenv(EnvLease); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return c, fmt.Errorf("faults: %s: %w", EnvLease, err)
		}
		c.Lease = d
	}
	if s := getenv(EnvHooks); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return c, fmt.Errorf("faults: %s: %w", EnvHooks, err)
		}
		c.Hooks = b
	}
	return c, c.validate()
}

func (c WorkerConfig) validate() error {
	switch {
	case c.TemporalAddress == "":
		return errors.New("faults: worker config: TemporalAddress is required")
	case c.Downstream == "":
		return errors.New("faults: worker config: Downstream is required")
	case len(c.TaskQueues) == 0:
		return errors.New("faults: worker config: TaskQueues is required")
	}
	return nil
}

// Worker is a running worker of the suite: one Temporal worker per task queue, with oncekey
// installed (interceptor, reconciliation workflow and activities) on Postgres.
type Worker struct {
	client  client.Client
	pool    *pgxpool.Pool
	workers []sdkworker.Worker
}

// StartWorker connects to Postgres and Temporal and starts polling. Stop stops it.
func StartWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Second
	}
	pool, err := pgstore.NewPool(ctx, cfg.DatabaseURL, nil)
	if err != nil {
		return nil, err
	}
	tools := NewTools(cfg.Downstream, cfg.Name, cfg.Hooks)
	reg, err := NewRegistry(tools, cfg.Lease)
	if err != nil {
		pool.Close()
		return nil, err
	}
	var store oncekeystore.Store = pgstore.New(pool, nil)
	if cfg.Hooks {
		store = &hookStore{Store: store, tools: tools}
	}
	opts := worker.Options{
		Store:    store,
		Registry: reg,
		OnEvent: func(e worker.Event) {
			tools.Report(WorkerEvent{Worker: cfg.Name, Tool: e.Tool, KeyPrefix: e.KeyPrefix, Outcome: string(e.Outcome), ErrType: errType(e.Err)})
		},
	}
	ic, err := worker.NewInterceptor(opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: cfg.TemporalAddress, Namespace: "default", Logger: quietLogger{}})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("faults: dial Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	w := &Worker{client: c, pool: pool}
	interceptors := []tinterceptor.WorkerInterceptor{ic}
	if cfg.Hooks {
		interceptors = append(interceptors, &hookInterceptor{tools: tools}) // inside oncekey's
	}
	for _, tq := range cfg.TaskQueues {
		sw := sdkworker.New(c, tq, sdkworker.Options{Interceptors: interceptors})
		if err := worker.Register(sw, opts); err != nil {
			w.Stop()
			return nil, err
		}
		tools.Register(sw)
		if err := sw.Start(); err != nil {
			w.Stop()
			return nil, fmt.Errorf("faults: start worker on %s: %w", tq, err)
		}
		w.workers = append(w.workers, sw)
	}
	return w, nil
}

// Stop stops polling and closes the connections.
func (w *Worker) Stop() {
	for _, sw := range w.workers {
		sw.Stop()
	}
	w.client.Close()
	w.pool.Close()
}

func errType(err error) string {
	var appErr interface{ Type() string }
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
