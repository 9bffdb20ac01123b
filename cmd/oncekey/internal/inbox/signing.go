package inbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/textcheck"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Signed decisions in the inbox (docs/inbox.md, "Signed decisions"): the inbox holds one key per
// person who signs in (Options.Signers) and signs what that person decides (approval decisions,
// resolutions, revocations of standing grants) with it, the decider being who is signed in;
// nothing in the posted form chooses the key or the decider.

// LoadSignKeys reads the sign-keys file at path: one line per person, NAME KEYFILE, where NAME
// is who signs in (a token's name, the proxy header's value, or the local user) and KEYFILE the
// private key decisionsig.LoadSigner reads (`oncekey keys gen` makes one), relative to the
// file's directory unless absolute. Blank lines and lines starting with # are skipped. A line of
// another shape, a name given twice or a key that does not load is an error naming the line.
// It returns the signers by name (Options.Signers).
func LoadSignKeys(path string) (map[string]decisionsig.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inbox: sign keys: %w", err)
	}
	out := map[string]decisionsig.Signer{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s line %d: want NAME KEYFILE, got %d fields", path, n, len(f))
		}
		name, file := f[0], f[1]
		if p := textcheck.Problem(name, 256); p != "" {
			return nil, fmt.Errorf("%s line %d: the name %s", path, n, p)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s line %d: %q is given twice; give each person one key", path, n, name)
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(path), file)
		}
		s, err := decisionsig.LoadSigner(file)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: the key of %s: %w", path, n, name, err)
		}
		out[name] = s
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no keys (one a line: NAME KEYFILE)", path)
	}
	return out, nil
}

// signing reports whether the inbox signs every decision (Options.Signers is set).
func (s *Server) signing() bool { return s.opts.Signers != nil }

// signer returns the key of id and "" when the inbox does not sign, or signs and holds id's key;
// else nil and the refusal's detail: what the person does to get one.
func (s *Server) signer(id *identity) (decisionsig.Signer, string) {
	if !s.signing() {
		return nil, ""
	}
	if k := s.opts.Signers[id.name]; k != nil {
		return k, ""
	}
	return nil, noKeyText(id.name)
}

// noKeyTitle and noKeyText are the answer to a decision by someone the inbox holds no key for.
const noKeyTitle = "Refused: you have no signing key here"

func noKeyText(name string) string {
	return "This inbox signs every decision with the key of who is signed in, and holds none for " + name +
		". Nothing was sent. Make one with `" + shell.Cmd("oncekey", "keys", "gen").Flag("--out", name+".pem").Flag("--name", name).String() +
		"`, have its public key added to the workers' trust list, and add the line “" + name + " " + name + ".pem” to the inbox's sign-keys file (--sign-keys), then restart oncekey serve; or decide with `oncekey approve|deny|resolve --sign-key FILE`."
}

// signedBy says who signed the decision stored with an approval (or a record) and whether it
// verifies against Options.TrustList: "ed25519:… (ada), verified", or why not; "" for none.
// audit is reconcile.AuditApproval's or AuditResolution's.
func (s *Server) signedBy(sig []byte, audit func(*decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error)) string {
	if len(sig) == 0 {
		return ""
	}
	if s.opts.TrustList == nil {
		signed, err := decisionsig.Decode(sig)
		if err != nil {
			return "unreadable: " + err.Error()
		}
		return signed.KeyID + ", not verified: the inbox has no trust list (--trust)"
	}
	signed, e, err := audit(s.opts.TrustList)
	switch {
	case signed == nil && err != nil:
		return "unreadable: " + err.Error()
	case signed == nil:
		return ""
	}
	who := signed.KeyID
	if e.Name != "" {
		who += " (" + e.Name + ")"
	}
	if err != nil {
		return who + ", NOT verified: " + err.Error()
	}
	return who + ", verified"
}

// approvalSignedBy is signedBy for the decision stored with ap.
func (s *Server) approvalSignedBy(ap *oncekeystore.Approval) string {
	return s.signedBy(ap.Signature, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditApproval(tl, ap)
	})
}

// approvalSigners says where the signers of an approval that asked for more than one stand
// ("2 of 2 signers", "1 of 2: waiting for another signer") and who each is, in the order they
// signed: "ed25519:… (ada), verified; approved by ada at …", or why it does not verify against
// Options.TrustList (reconcile.AuditApprovalSigners). nil for an approval without partial
// approvals.
func (s *Server) approvalSigners(ap *oncekeystore.Approval) []field {
	a := reconcile.AuditApprovalSigners(s.opts.TrustList, ap)
	if a == nil {
		return nil
	}
	var out []field
	if t := a.Text(s.opts.TrustList != nil); t != "" {
		out = append(out, field{"Signers", t})
	}
	for i, sg := range a.Signers {
		out = append(out, field{fmt.Sprintf("Signer %d", i+1), s.signerText(sg)})
	}
	return out
}

// signerText is one signer of an approval, as approvalSigners shows it.
func (s *Server) signerText(sg reconcile.ApprovalSigner) string {
	if sg.Signed == nil {
		return "unreadable: " + fmt.Sprint(sg.Err)
	}
	who := sg.Signed.KeyID
	if sg.Entry.Name != "" {
		who += " (" + sg.Entry.Name + ")"
	}
	switch {
	case s.opts.TrustList == nil:
		who += ", not verified: the inbox has no trust list (--trust)"
	case sg.Verified:
		who += ", verified"
	default:
		who += ", NOT verified: " + fmt.Sprint(sg.Err)
	}
	what := "approved"
	switch sg.Signed.Statement.Kind {
	case decisionsig.Deny:
		what = "denied"
	case decisionsig.RequestChanges:
		what = "changes requested"
	}
	who += "; " + what + " by " + sg.Signed.Statement.DecidedBy
	if at := sg.Signed.Statement.SignedAt; !at.IsZero() {
		who += " at " + at.UTC().Format(time.RFC3339)
	}
	if sg.Repeat {
		who += " (a signer already counted: counts once)"
	}
	return who
}

// grantSignedBy says who signed the making of g and, revoked, its revocation.
func (s *Server) grantSignedBy(g *oncekeystore.Grant) string {
	or := func(v string) string {
		if v == "" {
			return "unsigned"
		}
		return v
	}
	out := "made: " + or(s.signedBy(g.Signature, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditGrant(tl, g)
	}))
	if g.Status == oncekeystore.GrantRevoked {
		out += "; revoked: " + or(s.signedBy(g.RevocationSignature, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
			return reconcile.AuditRevocation(tl, g)
		}))
	}
	return out
}

// resolutionSignedBy is signedBy for the resolution stored with rec.
func (s *Server) resolutionSignedBy(rec *oncekeystore.Record, sig []byte) string {
	return s.signedBy(sig, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditResolution(tl, rec, sig)
	})
}
