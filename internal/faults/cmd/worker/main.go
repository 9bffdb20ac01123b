// Command worker is the fault suite's worker as a process of its own, so that a test can
// SIGKILL it at an exact point. It reads its configuration from the environment (see
// faults.ConfigFromEnv), prints "ready" once it polls, and stops cleanly on SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncekey/oncekey/internal/faults"
)

func main() {
	cfg, err := faults.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	w, err := faults.StartWorker(ctx, cfg)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready", cfg.Name)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	w.Stop()
}
