package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncekey/oncekey/internal/dev/privatepg"
)

// The pinned figures: a private Postgres instance of this run, started from the server's own
// binaries (initdb into a temporary directory, its own port and socket directory) and pinned to
// one CPU with taskset, while this process (started pinned to another CPU, `taskset -c 1`) and
// the pgbench it starts run on the other. Both clients then ask the same server on its own
// core, so the ratio compares what each client asks of the server, not how much CPU each takes
// from it; the worker's own CPU per call is measured apart (worker_cpu_claim_complete).

// privateSettings are copied from the main cluster (databaseURL) when it answers, so that the
// private instance commits the way it does: durability (fsync and friends) and memory.
var privateSettings = []string{"fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "shared_buffers", "commit_delay"}

// privatePostgres is a running private instance and the settings it was given.
type privatePostgres struct {
	*privatepg.Instance
	Settings map[string]string
}

// startPrivatePostgres starts a private instance (privatepg.Start) pinned to cpu, with the
// main cluster's privateSettings. Call Close when done.
func startPrivatePostgres(ctx context.Context, cpu int, mainURL string) (*privatePostgres, error) {
	settings := mainSettings(ctx, mainURL)
	inst, err := privatepg.Start(ctx, privatepg.Options{CPUs: strconv.Itoa(cpu), Settings: settings})
	if err != nil {
		return nil, err
	}
	return &privatePostgres{Instance: inst, Settings: settings}, nil
}

// mainSettings reads privateSettings from the main cluster; an unreachable one gives none (the
// private instance then runs with Postgres's defaults, fsync on).
func mainSettings(ctx context.Context, url string) map[string]string {
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "# private postgres: main cluster at %s not reachable (%v); Postgres defaults\n", url, err)
		return out
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY($1)`, privateSettings)
	if err != nil {
		return out
	}
	var name, setting, unit string
	_, _ = pgx.ForEachRow(rows, []any{&name, &setting, &unit}, func() error {
		// shared_buffers comes in 8kB pages: give it with its unit.
		if unit == "8kB" {
			setting = strconv.Itoa(mustAtoi(setting)*8) + "kB"
		}
		out[name] = setting
		return nil
	})
	return out
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
