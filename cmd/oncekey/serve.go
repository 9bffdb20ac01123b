package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey/cmd/oncekey/internal/inbox"
	"github.com/oncekey/oncekey/internal/shell"
)

// defaultListen is where `oncekey serve` listens unless --listen says otherwise.
const defaultListen = "127.0.0.1:7780"

// tokensEnv holds access tokens in the token file's format, for when no --token-file is given.
const tokensEnv = "ONCEKEY_SERVE_TOKENS"

// signKeysEnv names the sign-keys file (NAME KEYFILE lines) for when no --sign-keys is given.
const signKeysEnv = "ONCEKEY_SERVE_SIGN_KEYS"

type serveFlags struct {
	listen      string
	tokenFile   string
	proxyHeader string
	proxyAddrs  []string
	signKeys    string
	trust       string
}

func newServeCmd(a *app) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT] [--token-file FILE] [--proxy-header H --proxy-addr IP]",
		Short: "Serve the operator inbox: a web page of the operations and approvals waiting for a person, with forms to settle them",
		Long: "serve runs a small web app: the inbox lists unknown outcomes per tenant, oldest first (tool, workflow, age, failure,\n" +
			"effect reference); a record's page shows it (the stored result only on request) and takes a decision (applied with a\n" +
			"result and an effect reference, not applied, failed, a note), which goes to the waiting reconciliation workflow as\n" +
			"`oncekey resolve` sends it; the page shows the workflow's answer. A second queue lists the calls waiting for\n" +
			"approval, each with a form to approve or deny it as `oncekey approve` and `oncekey deny` do. Workers must run the\n" +
			"reconciliation and approval workflows.\n\n" +
			"It listens on " + defaultListen + " by default, and there serves without sign-in, deciding as $USER. Any other address\n" +
			"needs authentication: access tokens (--token-file, else " + tokensEnv + " holding the same lines: NAME TENANTS TOKEN,\n" +
			"TENANTS * or a,b,c), sent as Authorization: Bearer TOKEN or entered once on /login; and/or a header set by a\n" +
			"reverse proxy that authenticated the person (--proxy-header, believed only from --proxy-addr). Tokens given on a\n" +
			"loopback address are required there too. Every decision records who made it as resolved_by \"NAME (oncekey-serve)\".\n\n" +
			"With --sign-keys FILE (else " + signKeysEnv + "), lines NAME KEYFILE naming each signed-in person's private key (from\n" +
			"`oncekey keys gen`), the inbox signs every decision with the key of who is signed in, for workers with a trust list;\n" +
			"a person it holds no key for decides nothing. With --trust FILE (else " + trustListEnv + ") the pages show who signed\n" +
			"each stored decision and whether it verifies.",
		Example: "  oncekey serve\n" +
			"  oncekey serve --listen 0.0.0.0:7780 --token-file /etc/oncekey/tokens\n" +
			"  oncekey serve --listen 10.0.0.7:7780 --proxy-header X-Forwarded-User --proxy-addr 10.0.0.5",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options(a)
			if err != nil {
				return err
			}
			return a.serve(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", defaultListen, "address to listen on; anything but a loopback address requires --token-file, "+tokensEnv+" or --proxy-header")
	fl.StringVar(&f.tokenFile, "token-file", "", "access tokens, one a line: NAME TENANTS TOKEN (TENANTS: * or a,b,c) (default: "+tokensEnv+")")
	fl.StringVar(&f.proxyHeader, "proxy-header", "", "request header naming the person, set by the reverse proxy at --proxy-addr (e.g. X-Forwarded-User)")
	fl.StringSliceVar(&f.proxyAddrs, "proxy-addr", nil, "IP or CIDR of the reverse proxy that sets --proxy-header (repeatable)")
	fl.StringVar(&f.signKeys, "sign-keys", "", "sign each decision with the key of who is signed in: `FILE` of lines NAME KEYFILE (default: "+signKeysEnv+")")
	fl.StringVar(&f.trust, "trust", "", "the workers' trust list `FILE`, to show who signed each stored decision (default: "+trustListEnv+")")
	return cmd
}

// options checks the flags and builds the inbox's options (without Store and Temporal).
func (f *serveFlags) options(a *app) (inbox.Options, error) {
	opts := inbox.Options{Addr: f.listen, Namespace: a.ns(), ProxyHeader: f.proxyHeader, LocalUser: a.getenv("USER")}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return opts, fail(exitUsage, "--listen %q: want HOST:PORT, e.g. %s", f.listen, defaultListen)
	}
	text, source := a.getenv(tokensEnv), tokensEnv
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return opts, fail(exitUsage, "--token-file: %v", err)
		}
		if fi, err := os.Stat(f.tokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(a.stderr, "oncekey serve: warning: the token file %s can be read by other users (mode %04o); make it private with `%s`\n", f.tokenFile, fi.Mode().Perm(), shell.Cmd("chmod", "600").Arg(f.tokenFile))
		}
		text, source = string(b), f.tokenFile
	}
	if strings.TrimSpace(text) != "" {
		toks, err := inbox.ParseTokens(source, text)
		if err != nil {
			return opts, fail(exitUsage, "%v", err)
		}
		opts.Tokens = toks
	}
	signKeys := f.signKeys
	if signKeys == "" {
		signKeys = a.getenv(signKeysEnv)
	}
	if signKeys != "" {
		if fi, err := os.Stat(signKeys); err == nil && fi.Mode().Perm()&0o022 != 0 {
			fmt.Fprintf(a.stderr, "oncekey serve: warning: others can write the sign-keys file %s (mode %04o), and so choose whose key signs; make it yours only with `%s`\n", signKeys, fi.Mode().Perm(), shell.Cmd("chmod", "600").Arg(signKeys))
		}
		signers, err := inbox.LoadSignKeys(signKeys)
		if err != nil {
			return opts, fail(exitUsage, "--sign-keys: %v", err)
		}
		opts.Signers = signers
	}
	tl, err := a.trustList(f.trust)
	if err != nil {
		return opts, err
	}
	opts.TrustList = tl
	for _, s := range f.proxyAddrs {
		p, err := inbox.ParseProxyAddr(s)
		if err != nil {
			return opts, fail(exitUsage, "--proxy-addr: %v", err)
		}
		opts.ProxyAddrs = append(opts.ProxyAddrs, p)
	}
	switch {
	case f.proxyHeader != "" && len(opts.ProxyAddrs) == 0:
		return opts, fail(exitUsage, "--proxy-header needs --proxy-addr, the address of the proxy that sets it (the header is believed from there only)")
	case f.proxyHeader == "" && len(opts.ProxyAddrs) > 0:
		return opts, fail(exitUsage, "--proxy-addr goes with --proxy-header")
	case !inbox.IsLoopback(f.listen) && len(opts.Tokens) == 0 && f.proxyHeader == "":
		return opts, fail(exitUsage, "--listen %s is not a loopback address, so the inbox needs authentication: give --token-file (or %s), or --proxy-header with --proxy-addr; or listen on %s", f.listen, tokensEnv, defaultListen)
	}
	return opts, nil
}

// serve connects to Postgres and Temporal and serves the inbox until ctx ends.
func (a *app) serve(ctx context.Context, opts inbox.Options) error {
	s, closeStore, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := s.Check(ctx); err != nil {
		return a.storeError("serve", err)
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	opts.Store, opts.Temporal = s, c
	opts.Logger = slog.New(slog.NewTextHandler(a.stderr, nil))
	h, err := inbox.New(opts)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fail(exitFailed, "serve: %v; pick another --listen", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(a.stdout, "oncekey serve: the inbox is at http://%s/ (%s; %s, namespace %s)\n", ln.Addr(), authSummary(opts), a.where, a.ns())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fail(exitFailed, "serve: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(exitFailed, "serve: shutdown: %v", err)
	}
	return nil
}

// authSummary says in a few words how the inbox authenticates.
func authSummary(o inbox.Options) string {
	var parts []string
	if len(o.Tokens) > 0 {
		parts = append(parts, fmt.Sprintf("%d access token(s)", len(o.Tokens)))
	}
	if o.ProxyHeader != "" {
		addrs := make([]string, 0, len(o.ProxyAddrs))
		for _, p := range o.ProxyAddrs {
			addrs = append(addrs, prefixString(p))
		}
		parts = append(parts, fmt.Sprintf("header %s from %s", o.ProxyHeader, strings.Join(addrs, ", ")))
	}
	signed := ""
	if o.Signers != nil {
		signed = fmt.Sprintf("; signing with %d person(s)' keys", len(o.Signers))
	}
	if len(parts) == 0 {
		return "loopback only, no sign-in: decisions are recorded as " + o.LocalUser + signed
	}
	return "sign-in required: " + strings.Join(parts, ", ") + signed
}

func prefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
