package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/recordtest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
)

var servingRe = regexp.MustCompile(`the inbox is at http://(\S+)/`)

// startServe runs `oncekey serve args…` in-process with env until the test ends and returns the
// inbox's base URL (a wildcard listen address is reached on 127.0.0.1).
func startServe(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb recordtest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, append([]string{"serve"}, args...), strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, 0, code, "serve ends cleanly: %s", errb.String())
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context ending")
		}
	})
	var addr string
	require.Eventually(t, func() bool {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited with %d: %s", code, errb.String())
		default:
		}
		m := servingRe.FindStringSubmatch(out.String())
		if m == nil {
			return false
		}
		addr = m[1]
		return true
	}, time.Minute, 50*time.Millisecond)
	for _, wild := range []string{"0.0.0.0:", "[::]:"} {
		if p, ok := strings.CutPrefix(addr, wild); ok {
			addr = "127.0.0.1:" + p
		}
	}
	return "http://" + addr
}

// servicesEnv is a migrated schema and the test Temporal server, as the CLI's environment.
func servicesEnv(t *testing.T) map[string]string {
	t.Helper()
	url, _, _ := migrated(t)
	return map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": testenv.TemporalHostPort(t), "USER": "ines"}
}

// A non-loopback --listen without any way to authenticate is refused before anything listens.
func TestServeRefusesAnOpenNonLoopbackAddress(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":7780", "192.0.2.1:7780"} {
		r := cli(t, nil, "serve", "--listen", listen)
		require.Equal(t, exitUsage, r.code, listen)
		require.Contains(t, r.stderr, "is not a loopback address, so the inbox needs authentication", listen)
	}
	r := cli(t, nil, "serve", "--proxy-header", "X-Forwarded-User")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--proxy-header needs --proxy-addr")
	r = cli(t, map[string]string{tokensEnv: "ines * s3cr3"}, "serve", "--listen", "0.0.0.0:0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "ONCEKEY_SERVE_TOKENS line 1: the token is 5 bytes")
	require.NotContains(t, r.stderr, "s3cr3")
}

// Listening on all interfaces with tokens: a request without the token is refused, one with it
// is served.
func TestServeOnNonLoopbackRefusesARequestWithoutToken(t *testing.T) {
	needsServices(t)
	env := servicesEnv(t)
	token := "tok-0123456789abcdef0123456789abcdef"
	env[tokensEnv] = "ines * " + token
	base := startServe(t, env, "--listen", "0.0.0.0:0")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	get := func(auth string) (int, string) {
		req, err := http.NewRequest("GET", base+"/", nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, _ := get("")
	require.Equal(t, http.StatusSeeOther, code, "a browser without the token is sent to sign in")
	code, body := get("Bearer tok-wrong-0123456789abcdef0123456789abcdef")
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, body, "Unknown outcomes")
	code, body = get("Bearer " + token)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Unknown outcomes")
	require.Contains(t, body, "deciding as <strong>ines</strong>")
}

// chromedp is a test-only dependency of this command: no package of the module imports it, so
// the library's users never build it.
func TestChromedpStaysOutOfTheLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/oncekey/oncekey/...").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "github.com/oncekey/oncekey/cmd/oncekey/internal/inbox", "the list holds the inbox")
	require.NotContains(t, string(out), "chromedp")
}

// A token file others can read is taken, with a warning that says how to make it private.
func TestServeWarnsAboutAReadableTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte("ines * tok-0123456789abcdef0123456789abcdef\n"), 0o644))
	var errb bytes.Buffer
	a := &app{stderr: &errb, getenv: func(string) string { return "" }}
	f := serveFlags{listen: "0.0.0.0:7780", tokenFile: path}
	opts, err := f.options(a)
	require.NoError(t, err)
	require.Len(t, opts.Tokens, 1)
	require.Contains(t, errb.String(), "can be read by other users (mode 0644); make it private with `chmod 600 "+path+"`")

	require.NoError(t, os.Chmod(path, 0o600))
	errb.Reset()
	_, err = f.options(a)
	require.NoError(t, err)
	require.Empty(t, errb.String())
}
