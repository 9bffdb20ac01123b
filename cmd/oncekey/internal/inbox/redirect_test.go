package inbox

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/stretchr/testify/require"
)

// hostileNexts are sign-in targets that lead, or might lead in some browser, off the site:
// other hosts written with control characters, backslashes, percent-encoding (once, twice, more),
// schemes, user info, or nothing a path can be.
var hostileNexts = []string{
	"", "evil.example", "//evil.example/", "///evil.example", "////evil.example", "https://evil.example/", "http:evil.example",
	"javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,x", "/\\evil.example", "\\\\evil.example", "\\/evil.example",
	"/\t/evil.example/phish", "/\n/evil.example", "/\r/evil.example", "/ /evil.example", " /evil.example", "/\x00/evil.example",
	"/\x7f/evil.example", "/\u0085/evil.example", "/\u2028/evil.example", "/\xff/evil.example",
	"/%09/evil.example/phish", "/%0a/evil.example", "/%0D%0A/evil.example", "/%00/evil.example", "/%20/evil.example",
	"/%2F/evil.example", "/%2f%2fevil.example", "/%5Cevil.example", "/%5c%5cevil.example", "/%252F/evil.example",
	"/%25252F/evil.example", "/%2525252F/evil.example", "/%252525252F/evil.example", "/%2509/evil.example", "/%255C/evil.example",
	"/%zz", "/%", "/%E2%80%A8/evil.example", "/%C2%85/evil.example", "/%ff", "/record\\..\\..\\evil.example",
	"/?next=x\x0d\x0aSet-Cookie: a=b", "/#\t", "//user@evil.example", "/@evil.example\\@",
	"https:/evil.example", "https:\\\\evil.example", "%2F%2Fevil.example", "%09/evil.example",
}

// Every hostile target lands on "/"; targets on this site (as the inbox's own sign-in redirect
// writes them) are kept.
func TestSafeNextKeepsOnlySameOriginPaths(t *testing.T) {
	for _, n := range hostileNexts {
		require.Equal(t, "/", safeNext(n), "%q", n)
	}
	for _, n := range []string{"/", "/?tenant=acme", "/?tenant=a%2F%2Fb%09c", "/record?tenant=acme&key=ok1_ab&show=result",
		"/approval?key=ok1_ab&tenant=x%5Cy", "/record/a/b", "/#top"} {
		require.Equal(t, n, safeNext(n), "%q", n)
	}
}

// At the HTTP level: the sign-in page carries a hostile next as "/", and a sign-in posted with
// one (the form can be forged) is sent to "/", never to the next given.
func TestSignInRedirectsOnlyOnThisSite(t *testing.T) {
	e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; withTokens(o) })
	noNext := regexpNext("/")
	for _, n := range hostileNexts {
		if strings.ContainsAny(n, "\x00") {
			continue // no request line can carry it; safeNext refuses it above
		}
		cookie, tok := e.session("/login?next="+url.QueryEscape(n), nil)
		_, body := e.req("GET", "/login?next="+url.QueryEscape(n), nil, withCookie(cookie))
		require.Regexp(t, noNext, body, "%q", n)
		res, _ := e.req("POST", "/login", url.Values{"token": {inesToken}, "csrf": {tok}, "next": {n}}, withCookie(cookie))
		require.Equal(t, http.StatusSeeOther, res.StatusCode, "%q", n)
		require.Equal(t, "/", res.Header.Get("Location"), "%q", n)
	}
	// The case, as a raw request line.
	res, _ := e.req("GET", "/login?next=/%09/evil.example/phish", nil, nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	cookie, tok := e.session("/login", nil)
	res, _ = e.req("POST", "/login", url.Values{"token": {inesToken}, "csrf": {tok}, "next": {"/\t/evil.example/phish"}}, withCookie(cookie))
	require.Equal(t, "/", res.Header.Get("Location"))
	// A target on the site is kept.
	res, _ = e.req("POST", "/login", url.Values{"token": {inesToken}, "csrf": {tok}, "next": {"/record?tenant=acme&key=ok1_ab"}}, withCookie(cookie))
	require.Equal(t, "/record?tenant=acme&key=ok1_ab", res.Header.Get("Location"))
}

// regexpNext matches the sign-in form's hidden next field holding v.
func regexpNext(v string) string {
	return `name="next" value="` + v + `"`
}

// A form over the limit is answered 413, naming the limit, and changes nothing, whatever CSRF
// token it carries: for a decision (4 MiB) and for the sign-in (64 KiB).
func TestOversizedFormIs413(t *testing.T) {
	e := setup(t, nil)
	key, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, `{}`)
	cookie, tok := e.session("/", nil)
	big := `"` + strings.Repeat("x", maxForm) + `"`
	res, body := e.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {key}, "epoch": {strconv.FormatInt(epoch, 10)},
		"outcome": {"applied"}, "result": {big}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, body)
	require.Contains(t, body, "the form is too large")
	require.Contains(t, body, "at most 4 MiB")
	require.NotContains(t, body, "CSRF")
	res, body = e.req("POST", "/decide", url.Values{"reason": {big}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, body)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)

	e = setup(t, withTokens)
	cookie, tok = e.session("/login", nil)
	res, body = e.req("POST", "/login", url.Values{"token": {strings.Repeat("t", maxLoginForm)}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, body)
	require.Contains(t, body, "at most 64 KiB")
}
