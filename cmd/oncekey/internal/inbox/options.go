package inbox

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/textcheck"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Options configure the inbox. Store and Temporal are required.
type Options struct {
	// Addr is the host:port the server listens on. It decides the default: on a loopback address
	// (127.0.0.0/8, ::1, localhost) with no Tokens and no ProxyHeader the inbox serves without
	// authentication, deciding as LocalUser; on any other address (":8080" listens on all
	// interfaces) Tokens or ProxyHeader are required. Required.
	Addr string
	// LocalUser names who decides when the inbox serves without authentication (the user who
	// started it). Defaults to "local".
	LocalUser string
	// Logger gets one line for every decision sent or refused (who, tenant, operation key,
	// outcome, the answer) and for every refused sign-in. Defaults to discarding them.
	Logger *slog.Logger
	// Namespace is the Temporal namespace of the reconciliation workflows, shown on the pages.
	// Defaults to "default".
	Namespace string
	// ProxyAddrs are the addresses (single IPs or CIDR prefixes) of the reverse proxy that sets
	// ProxyHeader. The header is believed only on a request whose peer address is in one of them.
	// Required with ProxyHeader.
	ProxyAddrs []netip.Prefix
	// ProxyHeader is a request header set by a reverse proxy that has authenticated the person
	// (X-Forwarded-User, X-Auth-Request-Email): its value is who decides. Identities from it may
	// act for every tenant. Defaults to none.
	ProxyHeader string
	// Signers are the keys the inbox signs decisions with, by who is signed in (a token's Name,
	// the proxy header's value, or LocalUser; see LoadSignKeys). When it is not nil, every
	// decision the inbox sends (approve, approve with edited arguments, deny, request changes,
	// resolve, revoke a standing grant) is signed with the key of the signed-in identity, its statement's decider being
	// that identity (as resolved_by records it), and an identity without a key decides nothing:
	// the page says how to get one. Defaults to nil: decisions are sent unsigned, which workers
	// with a trust list refuse.
	Signers map[string]decisionsig.Signer
	// SessionTTL is how long a browser stays signed in after it gave a token. Defaults to 12h.
	SessionTTL time.Duration
	// Store holds the records. Required. When it is also an oncekeystore.ApprovalStore the inbox
	// shows a second queue, the calls waiting for approval, with a form to approve or deny each.
	Store oncekeystore.Store
	// Temporal is a client of the namespace the reconciliation and approval workflows run in.
	// Required.
	Temporal client.Client
	// TrustList is the workers' trust list (decisionsig.LoadTrustList): with it, the approval and
	// record pages show who signed the decision stored with them and whether it verifies, as
	// `oncekey show --trust` does. Defaults to none: the signing key is named, unverified.
	TrustList *decisionsig.TrustList
	// Tokens are the access tokens (see ParseTokens); a request carries one as
	// "Authorization: Bearer TOKEN", or a browser signs in with one on /login.
	Tokens []Token
}

// Token is an access token: who it stands for and the tenants it may see and decide for.
type Token struct {
	// Name is who the token stands for; decisions made with it record Name as resolved_by.
	Name string
	// Tenants the token may act for; nil means every tenant.
	Tenants []string
	hash    [sha256.Size]byte
}

// MinTokenBytes is the shortest token ParseTokens takes (32 bytes, e.g. `openssl rand -hex 16`).
const MinTokenBytes = 32

// ParseTokens reads access tokens, one a line: NAME TENANTS TOKEN, separated by spaces, where
// TENANTS is "*" (every tenant) or a comma-separated list. Blank lines and lines starting with #
// are skipped. A token shorter than MinTokenBytes, a repeated token or name, or a line of another
// shape is an error naming the line (never the token); source names the input in it.
func ParseTokens(source, text string) ([]Token, error) {
	var out []Token
	seen := map[[sha256.Size]byte]bool{}
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s line %d: want NAME TENANTS TOKEN (TENANTS is * or a,b,c), got %d fields", source, n, len(f))
		}
		name, tenants, secret := f[0], f[1], f[2]
		if p := textcheck.Problem(name, 256); p != "" {
			return nil, fmt.Errorf("%s line %d: the name %s", source, n, p)
		}
		if len(secret) < MinTokenBytes {
			return nil, fmt.Errorf("%s line %d: the token is %d bytes, shorter than %d; make one with `openssl rand -hex 32`", source, n, len(secret), MinTokenBytes)
		}
		t := Token{Name: name, hash: sha256.Sum256([]byte(secret))}
		if tenants != "*" {
			for _, tn := range strings.Split(tenants, ",") {
				if tn == "" || tn == "*" {
					return nil, fmt.Errorf("%s line %d: TENANTS is * or a comma-separated list of tenants, got %q", source, n, tenants)
				}
				t.Tenants = append(t.Tenants, tn)
			}
		}
		if seen[t.hash] {
			return nil, fmt.Errorf("%s line %d: the same token is given twice; give each person their own", source, n)
		}
		if names[name] {
			return nil, fmt.Errorf("%s line %d: the name %q is given twice; decisions must say who made them", source, n, name)
		}
		seen[t.hash], names[name] = true, true
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no tokens (one a line: NAME TENANTS TOKEN)", source)
	}
	return out, nil
}

// ParseProxyAddr reads one address of a reverse proxy: an IP (10.0.0.5, ::1) or a CIDR prefix
// (10.0.0.0/24).
func ParseProxyAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("proxy address %q: %w", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("proxy address %q is neither an IP nor a CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// IsLoopback reports whether the host of addr (host:port) is a loopback address or localhost.
// An empty host (":8080", all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// ErrNoAuth: the inbox would listen on a non-loopback address with no way to authenticate.
var ErrNoAuth = errors.New("inbox: a non-loopback address needs authentication")

func (o *Options) validate() error {
	switch {
	case o.Addr == "":
		return errors.New("inbox: Options.Addr is required")
	case o.Store == nil:
		return errors.New("inbox: Options.Store is required")
	case o.Temporal == nil:
		return errors.New("inbox: Options.Temporal is required")
	case o.ProxyHeader != "" && len(o.ProxyAddrs) == 0:
		return errors.New("inbox: Options.ProxyHeader needs Options.ProxyAddrs, the addresses of the proxy that sets it")
	case o.ProxyHeader == "" && len(o.ProxyAddrs) > 0:
		return errors.New("inbox: Options.ProxyAddrs without Options.ProxyHeader")
	case !IsLoopback(o.Addr) && len(o.Tokens) == 0 && o.ProxyHeader == "":
		return fmt.Errorf("%w: %s is not a loopback address; give access tokens or a proxy header", ErrNoAuth, o.Addr)
	}
	return nil
}

// open reports whether the inbox serves without authentication.
func (o *Options) open() bool {
	return IsLoopback(o.Addr) && len(o.Tokens) == 0 && o.ProxyHeader == ""
}
