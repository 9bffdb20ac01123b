package inbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/goleak"

	"github.com/oncekey/oncekey/internal/testing/recordtest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// TestMain stops the Temporal dev server the unconfirmed-decision test starts, then checks that
// no goroutine was left behind.
func TestMain(m *testing.M) {
	code := testenv.Run(m)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"), goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// The tokens of these tests; each is MinTokenBytes or longer.
const (
	inesToken = "ines-0123456789abcdef0123456789abcdef"
	acmeToken = "acme-0123456789abcdef0123456789abcdef"
)

var testTokens = "# name tenants token\n" +
	"ines * " + inesToken + "\n" +
	"omar acme " + acmeToken + "\n"

// env is an inbox over a memstore, with a Temporal client that never connects (these tests do
// not reach the reconciliation workflow; the browser test in cmd/oncekey does).
type env struct {
	t     *testing.T
	store *memstore.Store
	srv   *Server
}

func setup(t *testing.T, mutate func(*Options)) *env {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	st := memstore.New(nil)
	opts := Options{Addr: "127.0.0.1:7780", Store: st, Temporal: c, LocalUser: "ines"}
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := New(opts)
	require.NoError(t, err)
	return &env{t: t, store: st, srv: srv}
}

func withTokens(o *Options) {
	toks, err := ParseTokens("tokens", testTokens)
	if err != nil {
		panic(err)
	}
	o.Tokens = toks
}

// seed writes a record for (tenant, tool) and leaves it unknown with failure (st unknown) or
// applied with result; it returns the key and the epoch.
func (e *env) seed(tenant, tool string, st oncekeystore.Status, result []byte, failure string) (string, int64) {
	e.t.Helper()
	return recordtest.Seed(e.t, e.store, recordtest.Record{Tenant: tenant, WorkflowID: "wf-" + tool, StepID: "s1", Tool: tool,
		Status: st, Result: result, Failure: []byte(failure)})
}

// req sends one request to the inbox: from 127.0.0.1 to host 127.0.0.1:7780 unless mod says
// otherwise.
func (e *env) req(method, target string, form url.Values, mod func(*http.Request)) (*http.Response, string) {
	e.t.Helper()
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, newReq(method, target, form, mod))
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func newReq(method, target string, form url.Values, mod func(*http.Request)) *http.Request {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:7780"+target, body)
	r.RemoteAddr = "127.0.0.1:50000"
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if mod != nil {
		mod(r)
	}
	return r
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// session loads target (with mod, e.g. a bearer token) and returns the CSRF cookie and the
// form token the page carried, for a POST after it.
func (e *env) session(target string, mod func(*http.Request)) (*http.Cookie, string) {
	e.t.Helper()
	res, body := e.req("GET", target, nil, mod)
	require.Equal(e.t, http.StatusOK, res.StatusCode, body)
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == csrfCookie {
			cookie = c
		}
	}
	require.NotNil(e.t, cookie, "the page sets the CSRF cookie")
	// The token is the one the page's forms carry; pages without a form (an open inbox's list,
	// a record no workflow waits for) are given it the same way.
	who := e.srv.authenticate(newReq("GET", target, nil, mod))
	name := ""
	if who != nil {
		name = who.name
	}
	tok := e.srv.csrfMAC(cookie.Value, name)
	if m := csrfRe.FindStringSubmatch(body); m != nil {
		require.Equal(e.t, tok, m[1])
	}
	return cookie, tok
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func both(fs ...func(*http.Request)) func(*http.Request) {
	return func(r *http.Request) {
		for _, f := range fs {
			if f != nil {
				f(r)
			}
		}
	}
}

func withCookie(c *http.Cookie) func(*http.Request) { return func(r *http.Request) { r.AddCookie(c) } }

func TestOpenOnlyOnLoopback(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	for _, addr := range []string{"0.0.0.0:7780", ":7780", "10.1.2.3:7780", "[::]:7780", "example.com:7780"} {
		_, err := New(Options{Addr: addr, Store: memstore.New(nil), Temporal: c})
		require.ErrorIs(t, err, ErrNoAuth, addr)
	}
	for _, addr := range []string{"127.0.0.1:7780", "127.0.0.2:0", "[::1]:7780", "localhost:7780"} {
		_, err := New(Options{Addr: addr, Store: memstore.New(nil), Temporal: c})
		require.NoError(t, err, addr)
	}
	_, err = New(Options{Addr: "127.0.0.1:7780", Store: memstore.New(nil), Temporal: c, ProxyHeader: "X-Forwarded-User"})
	require.ErrorContains(t, err, "ProxyAddrs")
}

// On a non-loopback address every page needs the token: a browser without one is sent to sign
// in, anything else gets 401, a wrong token gets 401, and a POST without one changes nothing.
func TestNonLoopbackRefusesARequestWithoutToken(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	key, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, `{"message":"reset"}`)

	res, _ := e.req("GET", "/", nil, nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/login?next=%2F", res.Header.Get("Location"))

	for _, target := range []string{"/", recordLink("acme", key, false), recordLink("acme", key, true)} {
		res, body := e.req("GET", target, nil, bearer("wrong-0123456789abcdef0123456789abcdef"))
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, target)
		require.NotContains(t, body, key)
	}
	res, body := e.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)}, "outcome": {"not_applied"}}, nil)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, body)

	res, body = e.req("GET", "/", nil, bearer(inesToken))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "deciding as <strong>ines</strong>")
	require.Contains(t, body, shortKey(key))

	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
}

// Tokens given on a loopback address are required there too.
func TestLoopbackWithTokensRequiresThem(t *testing.T) {
	e := setup(t, withTokens)
	res, _ := e.req("GET", "/", nil, func(r *http.Request) { r.Header.Set("Accept", "application/json") })
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = e.req("GET", "/", nil, bearer("nope"))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

func TestSignInWithATokenSetsASession(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	cookie, tok := e.session("/login?next=%2F%3Ftenant%3Dacme", nil)

	// Without the CSRF token the sign-in is refused.
	res, _ := e.req("POST", "/login", url.Values{"token": {inesToken}}, withCookie(cookie))
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	// A wrong token is refused, and says so.
	res, body := e.req("POST", "/login", url.Values{"token": {"x"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, body, "not valid")

	res, _ = e.req("POST", "/login", url.Values{"token": {inesToken}, "csrf": {tok}, "next": {"/?tenant=acme"}}, withCookie(cookie))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/?tenant=acme", res.Header.Get("Location"))
	var sess *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == sessionCookie {
			sess = c
		}
	}
	require.NotNil(t, sess)
	require.True(t, sess.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, sess.SameSite)

	res, body = e.req("GET", "/", nil, both(withCookie(sess), withCookie(cookie)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "deciding as <strong>ines</strong>")

	// Signing out ends the session on the server, not only in the browser.
	m := csrfRe.FindStringSubmatch(body)
	require.NotNil(t, m)
	res, _ = e.req("POST", "/logout", url.Values{"csrf": {m[1]}}, both(withCookie(sess), withCookie(cookie)))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = e.req("GET", "/", nil, both(withCookie(sess), withCookie(cookie)))
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the old session cookie no longer signs in")

	// A next pointing off the site lands on the inbox.
	for _, n := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
		require.Equal(t, "/", safeNext(n), n)
	}
}

// Every POST needs the CSRF token of the page that made the form: none, a wrong one, or one made
// for another person is refused and changes nothing.
func TestPostWithoutCSRFTokenIsRefused(t *testing.T) {
	e := setup(t, nil)
	key, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, `{"message":"reset"}`)
	cookie, tok := e.session(recordLink("acme", key, false), nil)
	form := func(csrf string) url.Values {
		v := url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch+1, 10)}, "outcome": {"not_applied"}}
		if csrf != "" {
			v.Set(csrfField, csrf)
		}
		return v
	}
	for name, c := range map[string]struct {
		form   url.Values
		cookie *http.Cookie
	}{
		"no token":             {form(""), cookie},
		"wrong token":          {form("AAAA"), cookie},
		"token, no cookie":     {form(tok), nil},
		"another cookie":       {form(tok), &http.Cookie{Name: csrfCookie, Value: randomString()}},
		"another person's mac": {form(e.srv.csrfMAC(cookie.Value, "omar")), cookie},
	} {
		mod := func(r *http.Request) {}
		if c.cookie != nil {
			mod = withCookie(c.cookie)
		}
		res, body := e.req("POST", "/resolve", c.form, mod)
		require.Equal(t, http.StatusForbidden, res.StatusCode, name)
		require.Contains(t, body, "CSRF token is missing or wrong", name)
	}
	// With the token the form gets past the check (and is then refused for its stale epoch,
	// before anything reaches Temporal).
	res, body := e.req("POST", "/resolve", form(tok), withCookie(cookie))
	require.Equal(t, http.StatusConflict, res.StatusCode, body)
	require.Contains(t, body, "the record changed since this page was loaded")
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
}

// A form posted from another site is refused by the cross-origin check even with a good token.
func TestCrossOriginPostIsRefused(t *testing.T) {
	e := setup(t, nil)
	key, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, `{}`)
	cookie, tok := e.session("/", nil)
	v := url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)}, "outcome": {"not_applied"}, "csrf": {tok}}
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}} {
		res, body := e.req("POST", "/resolve", v, both(withCookie(cookie), func(r *http.Request) {
			for k, val := range h {
				r.Header.Set(k, val)
			}
		}))
		require.Equal(t, http.StatusForbidden, res.StatusCode, h)
		require.Contains(t, body, "cross-origin", h)
	}
}

// An open inbox answers only loopback host names, so a page on another site cannot read it by
// pointing its own name at 127.0.0.1.
func TestOpenInboxRefusesOtherHostNames(t *testing.T) {
	e := setup(t, nil)
	for _, host := range []string{"evil.example", "evil.example:7780", "10.0.0.1:7780"} {
		res, _ := e.req("GET", "/", nil, func(r *http.Request) { r.Host = host })
		require.Equal(t, http.StatusMisdirectedRequest, res.StatusCode, host)
	}
	for _, host := range []string{"localhost:7780", "127.0.0.1:7780", "[::1]:7780", "localhost"} {
		res, _ := e.req("GET", "/", nil, func(r *http.Request) { r.Host = host })
		require.Equal(t, http.StatusOK, res.StatusCode, host)
	}
}

// A token limited to tenants sees and decides only for those.
func TestTokenLimitedToTenants(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	acmeKey, _ := e.seed("acme", "BookAcme", oncekeystore.StatusUnknown, nil, `{}`)
	globexKey, globexEpoch := e.seed("globex", "BookGlobex", oncekeystore.StatusUnknown, nil, `{}`)

	res, body := e.req("GET", "/", nil, bearer(acmeToken))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "BookAcme")
	require.NotContains(t, body, "BookGlobex")
	require.NotContains(t, body, shortKey(globexKey))

	res, body = e.req("GET", "/?tenant=globex", nil, bearer(acmeToken))
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.NotContains(t, body, "BookGlobex")
	res, body = e.req("GET", recordLink("globex", globexKey, true), nil, bearer(acmeToken))
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.NotContains(t, body, "BookGlobex")
	res, _ = e.req("GET", recordLink("acme", acmeKey, false), nil, bearer(acmeToken))
	require.Equal(t, http.StatusOK, res.StatusCode)

	cookie, tok := e.session("/", bearer(acmeToken))
	res, body = e.req("POST", "/resolve", url.Values{"tenant": {"globex"}, "key": {globexKey}, "epoch": {strconv.FormatInt(globexEpoch, 10)}, "outcome": {"not_applied"}, "csrf": {tok}},
		both(bearer(acmeToken), withCookie(cookie)))
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "globex", OperationKey: globexKey})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)

	// The unlimited token sees both.
	_, body = e.req("GET", "/", nil, bearer(inesToken))
	require.Contains(t, body, "BookAcme")
	require.Contains(t, body, "BookGlobex")
}

// The proxy header is believed only from the proxy's address, and names who decides.
func TestProxyHeaderOnlyFromTheProxy(t *testing.T) {
	e := setup(t, func(o *Options) {
		o.Addr = "0.0.0.0:7780"
		o.ProxyHeader = "X-Forwarded-User"
		o.ProxyAddrs = []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}
	})
	from := func(addr, user string) func(*http.Request) {
		return func(r *http.Request) { r.RemoteAddr = addr; r.Header.Set("X-Forwarded-User", user) }
	}
	res, body := e.req("GET", "/", nil, from("10.0.0.5:41000", "alice@example.com"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "deciding as <strong>alice@example.com</strong>")

	res, _ = e.req("GET", "/", nil, from("10.0.0.6:41000", "alice@example.com"))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "not from the proxy")
	res, _ = e.req("GET", "/", nil, from("127.0.0.1:41000", "alice@example.com"))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "loopback is not the proxy either")
	res, _ = e.req("GET", "/", nil, from("10.0.0.5:41000", ""))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "the proxy sent no identity")
	res, _ = e.req("GET", "/", nil, from("10.0.0.5:41000", "alice\x1b[31m"))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "control characters are no identity")
}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	e := setup(t, withTokens)
	key, _ := e.seed("acme", "Book", oncekeystore.StatusApplied, nil, "")
	for _, c := range []struct {
		method, target string
		mod            func(*http.Request)
	}{
		{"GET", "/", bearer(inesToken)},
		{"GET", "/", nil},
		{"GET", "/login", nil},
		{"GET", recordLink("acme", key, false), bearer(inesToken)},
		{"GET", "/static/inbox.js", nil},
		{"GET", "/static/inbox.css", nil},
		{"GET", "/nope", nil},
		{"POST", "/resolve", bearer(inesToken)},
		{"GET", "/", func(r *http.Request) { r.Host = "evil.example" }},
	} {
		res, _ := e.req(c.method, c.target, nil, c.mod)
		h := res.Header
		name := c.method + " " + c.target
		csp := h.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'", name)
		require.Contains(t, csp, "script-src 'self'", name)
		require.NotContains(t, csp, "unsafe-inline", name)
		require.Contains(t, csp, "frame-ancestors 'none'", name)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), name)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), name)
		require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), name)
	}
	// The pages have no inline script or style for the CSP to block.
	_, body := e.req("GET", recordLink("acme", key, false), nil, bearer(inesToken))
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]|style=|onclick=|onload=`, body)
}

// Stored strings come from workflows, and so from models: every page escapes them.
func TestOutputIsEscaped(t *testing.T) {
	e := setup(t, nil)
	evil := `<script>alert(1)</script>`
	key, _ := e.seed("acme", "Book"+evil, oncekeystore.StatusUnknown, nil, `{"message":"reset <img src=x onerror=alert(2)>"}`)
	for _, target := range []string{"/", recordLink("acme", key, false), "/?tenant=" + url.QueryEscape(evil)} {
		_, body := e.req("GET", target, nil, nil)
		require.NotContains(t, body, "<script>alert", target)
		require.NotContains(t, body, "<img src=x", target)
	}
	_, body := e.req("GET", "/", nil, nil)
	require.Contains(t, body, "Book&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, body, "reset &lt;img src=x onerror=alert(2)&gt;")
}

// The stored result is shown only on request, as `oncekey show --show-result` does.
func TestStoredResultOnlyOnRequest(t *testing.T) {
	e := setup(t, nil)
	res, err := reconcile.EncodeResult(nil, []byte(`{"card":"4111-1111"}`))
	require.NoError(t, err)
	key, _ := e.seed("acme", "Charge", oncekeystore.StatusApplied, res, "")
	_, body := e.req("GET", recordLink("acme", key, false), nil, nil)
	require.NotContains(t, body, "4111")
	require.Contains(t, body, "bytes stored")
	_, body = e.req("GET", recordLink("acme", key, true), nil, nil)
	require.Contains(t, body, "4111-1111")
}

// A result that is not JSON is refused on the page with the reason, and nothing is sent.
func TestResultThatIsNotJSONIsRefused(t *testing.T) {
	e := setup(t, nil)
	key, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, `{}`)
	cookie, tok := e.session("/", nil)
	for _, c := range []struct{ outcome, ref, result, want string }{
		{"applied", "", `{"id": `, "the result is not valid JSON"},
		{"not_applied", "", `{"id":"x"}`, "go with “applied” only"},
		{"failed", "REF-1", ``, "go with “applied” only"},
		{"maybe", "", ``, "the decision is not valid"},
	} {
		res, body := e.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)},
			"outcome": {c.outcome}, "effect_reference": {c.ref}, "result": {c.result}, "csrf": {tok}}, withCookie(cookie))
		require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
		require.Contains(t, body, c.want)
		require.Contains(t, body, "Nothing was sent")
	}
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
}

func TestParseTokens(t *testing.T) {
	toks, err := ParseTokens("f", testTokens)
	require.NoError(t, err)
	require.Len(t, toks, 2)
	require.Equal(t, "ines", toks[0].Name)
	require.Nil(t, toks[0].Tenants)
	require.Equal(t, []string{"acme"}, toks[1].Tenants)

	secret := "short-secret"
	for text, want := range map[string]string{
		"ines * " + secret:  "shorter than 32",
		"ines " + inesToken: "want NAME TENANTS TOKEN",
		"ines * " + inesToken + "\nomar * " + inesToken:    "same token is given twice",
		"ines * " + inesToken + "\nines acme " + acmeToken: "given twice",
		"ines acme,,b " + inesToken:                        "comma-separated",
		"# only a comment\n":                               "no tokens",
	} {
		_, err := ParseTokens("f", text)
		require.ErrorContains(t, err, want, text)
		require.NotContains(t, err.Error(), secret)
		require.NotContains(t, err.Error(), inesToken)
	}
}

// A form decides about the record as it showed it: once the record has moved on (another person
// settled it, or it was claimed again at a new epoch) the form is refused and nothing is sent.
func TestStaleFormIsRefused(t *testing.T) {
	var log recordtest.SyncBuffer
	e := setup(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	key, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, `{}`)
	cookie, tok := e.session("/", nil)
	post := func(ep int64) (*http.Response, string) {
		return e.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(ep, 10)},
			"outcome": {"not_applied"}, "csrf": {tok}}, withCookie(cookie))
	}
	res, body := post(epoch + 1)
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, body, "The form showed epoch 2; the record is now unknown at epoch 1")

	// Someone else settles it; the form shown before is refused although its epoch matches.
	_, err := e.store.Resolve(context.Background(), &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: key, Epoch: 1, Status: oncekeystore.StatusReleased, ResolvedBy: "omar"})
	require.NoError(t, err)
	res, body = post(epoch)
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, body, "the record is now released at epoch 1")
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, "omar", rec.ResolvedBy, "the earlier decision stands")
	// Each refused decision leaves a line saying who tried what.
	require.Len(t, regexp.MustCompile(`msg=decision by="ines \(oncekey-serve\)" tenant=acme key=`+key+` epoch=[12] outcome=not_applied answer=refused`).FindAllString(log.String(), -1), 2, log.String())
}

func TestRequestIDFromTheFormOrFresh(t *testing.T) {
	require.Equal(t, "0123456789abcdef01234567", requestID("0123456789abcdef01234567"))
	for _, bad := range []string{"", "<script>", "ABCDEF", strings.Repeat("a", 65)} {
		got := requestID(bad)
		require.Regexp(t, `^[0-9a-f]{24}$`, got, bad)
	}
	require.NotEqual(t, requestID(""), requestID(""))
}
