// Command temporal is the Temporal CLI that `make temporal` builds for oncekey's dev servers.
//
// `temporal server start-dev` runs the dev server of Temporal CLI v1.9.1 (its internal/devserver
// package: Temporal server v1.32.0 on SQLite, standalone activities on). Every other subcommand is
// handed to the full Temporal CLI v1.5.1 installed next to this binary (cli-v1.5.1/temporal).
//
// Why two: the v1.9.1 CLI's go.mod replaces its nested module github.com/temporalio/cli/cliext with
// a directory that the module zip leaves out, and the module proxy serves no version of cliext, so
// the full v1.9.1 CLI cannot be built from the proxy. Its dev server does not import cliext.
//
// This file lives under testdata so the oncekey module never compiles it: `make temporal` copies it
// into a scratch copy of the v1.9.1 module (the only place its internal/devserver import is legal)
// and builds it there.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"

	"github.com/temporalio/cli/internal/devserver"
)

// clientCLI is the full CLI the other subcommands go to, relative to this binary's directory.
const clientCLI = "cli-v1.5.1/temporal"

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "server" && os.Args[2] == "start-dev" {
		if err := startDev(os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "temporal server start-dev:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-v" || os.Args[1] == "version") {
		// The client CLI's own line names its own server version, not the one start-dev runs.
		fmt.Println("oncekey's temporal: server start-dev is Temporal CLI v1.9.1's dev server (Temporal server v1.32.0); other subcommands:")
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporal: find this binary's directory:", err)
		os.Exit(1)
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	cli := filepath.Join(filepath.Dir(self), clientCLI)
	if err := syscall.Exec(cli, append([]string{cli}, os.Args[1:]...), os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "temporal: run %s: %v (run `make temporal` to install it)\n", cli, err)
		os.Exit(1)
	}
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// startDev serves `server start-dev` with the flags the Go SDK's testsuite.StartDevServer and
// oncekey's docs pass, until SIGINT or SIGTERM.
func startDev(args []string) error {
	fs := flag.NewFlagSet("start-dev", flag.ContinueOnError)
	ip := fs.String("ip", "127.0.0.1", "frontend IP")
	port := fs.Int("port", 7233, "frontend gRPC port")
	httpPort := fs.Int("http-port", 0, "frontend HTTP port (0: a free one)")
	metricsPort := fs.Int("metrics-port", 0, "metrics port (0: a free one)")
	uiIP := fs.String("ui-ip", "", "UI IP (default: --ip)")
	uiPort := fs.Int("ui-port", 0, "UI port (default: --port + 1000)")
	headless := fs.Bool("headless", false, "no UI")
	dbFile := fs.String("db-filename", "", "SQLite file (default: in memory)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn, error or never")
	logFormat := fs.String("log-format", "text", "text or json")
	var namespaces, dynamic, searchAttrs list
	fs.Var(&namespaces, "namespace", "namespace to register (repeatable; default is always registered)")
	fs.Var(&dynamic, "dynamic-config-value", "KEY=JSON dynamic config value (repeatable)")
	fs.Var(&searchAttrs, "search-attribute", "NAME=TYPE search attribute (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ip == "localhost" {
		*ip = "127.0.0.1"
	}
	opts := devserver.StartOptions{
		FrontendIP:             *ip,
		FrontendPort:           *port,
		FrontendHTTPPort:       *httpPort,
		MetricsPort:            *metricsPort,
		Namespaces:             append([]string{"default"}, namespaces...),
		DatabaseFile:           *dbFile,
		ClusterID:              uuid.NewString(),
		MasterClusterName:      "active",
		CurrentClusterName:     "active",
		InitialFailoverVersion: 1,
		DynamicConfigValues: map[string]any{
			// As the full CLI does: search attributes and Nexus endpoints visible at once.
			"system.forceSearchAttributesCacheRefreshOnRead": true,
			"system.forceNexusEndpointRefreshOnRead":         true,
			"frontend.persistenceMaxQPS":                     10000,
			"history.persistenceMaxQPS":                      45000,
		},
		SearchAttributes: map[string]enums.IndexedValueType{},
	}
	if *logLevel == "never" {
		opts.LogLevel = 100
	} else if err := opts.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: %w", *logLevel, err)
	}
	handlerOpts := &slog.HandlerOptions{Level: opts.LogLevel}
	if *logFormat == "json" {
		opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, handlerOpts))
	} else {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, handlerOpts))
	}
	for _, kv := range dynamic {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--dynamic-config-value %q: want KEY=JSON", kv)
		}
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		var val any
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("--dynamic-config-value %q: value is not JSON: %w", kv, err)
		}
		// The server's dynamic config wants int, not a JSON number.
		if n, ok := val.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				val = int(i)
			} else if f, err := n.Float64(); err == nil {
				val = f
			}
		}
		opts.DynamicConfigValues[k] = val
	}
	for _, kv := range searchAttrs {
		name, typ, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--search-attribute %q: want NAME=TYPE", kv)
		}
		vt, err := enums.IndexedValueTypeFromString(typ)
		if err != nil || vt == enums.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return fmt.Errorf("--search-attribute %q: unknown type %q (Keyword, Text, Int, Double, Bool, Datetime, KeywordList)", kv, typ)
		}
		opts.SearchAttributes[name] = vt
	}
	if !*headless {
		opts.UIIP, opts.UIPort = *uiIP, *uiPort
		if opts.UIIP == "" {
			opts.UIIP = opts.FrontendIP
		}
		if opts.UIPort == 0 {
			opts.UIPort = min(opts.FrontendPort+1000, 65535)
		}
	}
	if opts.MetricsPort == 0 {
		opts.MetricsPort = devserver.MustGetFreePort(opts.FrontendIP)
	}
	if err := devserver.CheckPortFree(opts.FrontendIP, opts.FrontendPort); err != nil {
		return fmt.Errorf("frontend port %d: %w", opts.FrontendPort, err)
	}
	srv, err := devserver.Start(opts)
	if err != nil {
		return err
	}
	fmt.Printf("Temporal dev server (CLI v1.9.1's, server v1.32.0) on %s:%d\n", opts.FrontendIP, opts.FrontendPort)
	if !*headless {
		fmt.Printf("Temporal UI: http://%s:%d\n", opts.UIIP, opts.UIPort)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.SuppressWarnings()
	srv.Stop()
	return nil
}
