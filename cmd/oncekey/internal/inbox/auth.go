package inbox

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/oncekey/oncekey/internal/textcheck"
)

// Cookie names. Both are HttpOnly and SameSite=Strict, Secure when the request came over TLS.
const (
	sessionCookie = "oncekey_session"
	csrfCookie    = "oncekey_csrf"
	// csrfField is the form field that carries the CSRF token.
	csrfField = "csrf"
)

// resolvedBySuffix ends every resolved_by the inbox records, as "(oncekey-cli --direct)" does
// for the CLI's direct path.
const resolvedBySuffix = " (oncekey-serve)"

// identity is who a request acts for.
type identity struct {
	// name is who decides: a token's Name, the proxy header's value, or Options.LocalUser.
	name string
	// tenants the identity may act for; nil means every tenant.
	tenants []string
	// via says how the identity was established: "token", "proxy" or "local".
	via string
}

// allows reports whether id may see and decide for tenant.
func (id *identity) allows(tenant string) bool {
	return id.tenants == nil || slices.Contains(id.tenants, tenant)
}

// resolvedBy is what a decision by id records as resolved_by: its name and where it was made.
func (id *identity) resolvedBy() string { return id.name + resolvedBySuffix }

// session is a browser signed in with a token.
type session struct {
	id      identity
	expires time.Time
}

// authenticate returns who r acts for, or nil. In order: the proxy header on a request from the
// proxy, an Authorization bearer token, a session cookie, and, when the inbox is open (loopback,
// no authentication configured), the local user.
func (s *Server) authenticate(r *http.Request) *identity {
	if s.opts.ProxyHeader != "" && s.fromProxy(r) {
		if v := strings.TrimSpace(r.Header.Get(s.opts.ProxyHeader)); v != "" && textcheck.Problem(v, 256) == "" && printableASCIIOrUTF8(v) {
			return &identity{name: v, via: "proxy"}
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if secret, ok := strings.CutPrefix(h, "Bearer "); ok {
			return s.token(secret)
		}
		return nil
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ss, ok := s.sessions[c.Value]; ok {
			if s.now().Before(ss.expires) {
				id := ss.id
				return &id
			}
			delete(s.sessions, c.Value)
		}
	}
	if s.opts.open() {
		return &identity{name: s.opts.LocalUser, via: "local"}
	}
	return nil
}

// token returns the identity of the access token secret, or nil. Every configured token is
// compared, in constant time, whatever matches.
func (s *Server) token(secret string) *identity {
	h := sha256.Sum256([]byte(secret))
	match := -1
	for i := range s.opts.Tokens {
		if subtle.ConstantTimeCompare(h[:], s.opts.Tokens[i].hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil
	}
	t := s.opts.Tokens[match]
	return &identity{name: t.Name, tenants: t.Tenants, via: "token"}
}

// fromProxy reports whether r's peer address is one of Options.ProxyAddrs.
func (s *Server) fromProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range s.opts.ProxyAddrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// printableASCIIOrUTF8 refuses control characters in an identity taken from a header.
func printableASCIIOrUTF8(v string) bool {
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// newSession signs a browser in as id and returns the session cookie's value.
func (s *Server) newSession(id identity) string {
	v := randomString()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ss := range s.sessions {
		if !now.Before(ss.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[v] = &session{id: id, expires: now.Add(s.opts.SessionTTL)}
	return v
}

func (s *Server) endSession(r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
}

// csrfToken returns the CSRF token for the forms of a page served to r on behalf of name
// ("" before sign-in), setting the CSRF cookie on w when r has none. The token is an HMAC, under a
// key that lives as long as the process, of the cookie's value and the name: a form posted from
// another site lacks it (it cannot read the page), and a token taken from one person's page does
// not pass for another's (the signed double-submit cookie pattern).
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request, name string) string {
	c, err := r.Cookie(csrfCookie)
	v := ""
	if err == nil && len(c.Value) == 43 {
		v = c.Value
	} else {
		v = randomString()
		s.setCookie(w, r, csrfCookie, v, 0)
	}
	return s.csrfMAC(v, name)
}

func (s *Server) csrfMAC(cookie, name string) string {
	m := hmac.New(sha256.New, s.secret[:])
	m.Write([]byte(cookie))
	m.Write([]byte{0})
	m.Write([]byte(name))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether the POST r carries the CSRF token of its cookie and name.
func (s *Server) checkCSRF(r *http.Request, name string) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	want := s.csrfMAC(c.Value, name)
	got := r.PostFormValue(csrfField)
	return hmac.Equal([]byte(got), []byte(want))
}

// setCookie sets an HttpOnly, SameSite=Strict cookie, Secure when r came over TLS (directly,
// or through the proxy as X-Forwarded-Proto: https). maxAge < 0 deletes it.
func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	secure := r.TLS != nil || (s.opts.ProxyHeader != "" && s.fromProxy(r) && r.Header.Get("X-Forwarded-Proto") == "https")
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// randomString is 32 random bytes, base64url without padding (43 characters).
func randomString() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// loopbackHost reports whether the Host header of r names a loopback host. An open inbox
// answers only those, so a web page cannot reach it by pointing its own name at 127.0.0.1 (DNS
// rebinding).
func loopbackHost(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return IsLoopback(net.JoinHostPort(host, "0"))
}
