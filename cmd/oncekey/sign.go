package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Signed decisions (docs/approvals.md, "Signed decisions"): approve, deny and resolve sign with
// the operator's key (--sign-key, ONCEKEY_SIGN_KEY); `oncekey keys gen` makes a key pair;
// `oncekey show` and `oncekey audit` verify the stored signatures against a trust list (--trust,
// ONCEKEY_TRUST_LIST).

// The environment variables --sign-key and --trust default to.
const (
	signKeyEnv   = "ONCEKEY_SIGN_KEY"
	trustListEnv = "ONCEKEY_TRUST_LIST"
)

// addSignKey defines --sign-key on cmd.
func (f *deciderFlags) addSignKey(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.signKey, "sign-key", "", "sign the decision with the private key in `FILE` (PEM or base64; `oncekey keys gen` makes one) (default: "+signKeyEnv+")")
}

// signer returns the signer of --sign-key (else ONCEKEY_SIGN_KEY); nil when neither is set.
func (a *app) signer(f *deciderFlags) (decisionsig.Signer, error) {
	path := f.signKey
	if path == "" {
		path = a.getenv(signKeyEnv)
	}
	if path == "" {
		return nil, nil
	}
	s, err := decisionsig.LoadSigner(path)
	if err != nil {
		return nil, fail(exitUsage, "--sign-key: %v; nothing was sent", err)
	}
	return s, nil
}

// signDecision returns d signed with the operator's key, when one is given, over the approval
// of key as the store holds its request (the statement names its episode, request token and
// fingerprint, read from there). A store that cannot be read, or an approval that is not pending
// at d's episode, is an error, and nothing is sent.
func (a *app) signDecision(ctx context.Context, f *decideFlags, key string, d reconcile.Decision) (reconcile.Decision, error) {
	s, err := a.signer(&f.deciderFlags)
	if err != nil || s == nil {
		return d, err
	}
	st, closeStore, err := a.store(ctx)
	if err != nil {
		return d, fmt.Errorf("%w; a signed decision names the request it decides, read from the store", err)
	}
	defer closeStore()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	ap, err := st.GetApproval(gctx, &oncekeystore.GetParams{Tenant: f.tenant, OperationKey: key})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		return d, a.approvalNotFound(key, f.tenant, f.tenantGiven)
	case err != nil:
		return d, a.storeError(fmt.Sprintf("read the approval of %s (tenant %s) to sign the decision", key, f.tenant), err)
	case ap.Status != oncekeystore.ApprovalPending:
		return d, decidedError(a, ap)
	}
	signed, err := reconcile.SignDecision(s, ap, d)
	if err != nil {
		return d, fail(exitUsage, "sign the decision: %s; nothing was sent", oneLine(err))
	}
	return signed, nil
}

// signResolution returns r signed with the operator's key, when one is given, over the record of
// key as the store holds it (its namespace and tool).
func (a *app) signResolution(ctx context.Context, f *resolveFlags, key string, r reconcile.Resolution) (reconcile.Resolution, error) {
	s, err := a.signer(&f.deciderFlags)
	if err != nil || s == nil {
		return r, err
	}
	st, closeStore, err := a.store(ctx)
	if err != nil {
		return r, fmt.Errorf("%w; a signed resolution names the record it settles, read from the store", err)
	}
	defer closeStore()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	rec, err := st.Get(gctx, &oncekeystore.GetParams{Tenant: f.tenant, OperationKey: key})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		return r, a.recordNotFound(key, f.tenant, f.tenantGiven)
	case err != nil:
		return r, a.storeError(fmt.Sprintf("read the record of %s (tenant %s) to sign the resolution", key, f.tenant), err)
	}
	signed, err := reconcile.SignResolution(s, rec, r)
	if err != nil {
		return r, fail(exitUsage, "sign the resolution: %s; nothing was sent", oneLine(err))
	}
	return signed, nil
}

// trustList loads the trust list of path (else ONCEKEY_TRUST_LIST); nil when neither is set.
func (a *app) trustList(path string) (*decisionsig.TrustList, error) {
	if path == "" {
		path = a.getenv(trustListEnv)
	}
	if path == "" {
		return nil, nil
	}
	tl, err := decisionsig.LoadTrustList(path)
	if err != nil {
		return nil, fail(exitUsage, "--trust: %v", err)
	}
	return tl, nil
}

// verdict is what a stored signature proves: who signed (the key and its name in the trust
// list) and whether it verifies as the statement of the stored decision.
type verdict struct {
	KeyID string `json:"key_id"`
	Name  string `json:"name,omitempty"`
	// Verified: the signature verifies, by a key the trust list trusted for this decision when it
	// was signed, and its statement is exactly the stored decision. Problem says why not.
	Verified bool   `json:"verified"`
	Problem  string `json:"problem,omitempty"`
}

// verdictOf is what audit (reconcile.AuditApproval, AuditResolution) found of a stored
// signature; without tl only the key is named. nil for no signature.
func verdictOf(tl *decisionsig.TrustList, sig []byte, audit func(*decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error)) *verdict {
	if len(sig) == 0 {
		return nil
	}
	if tl == nil {
		s, err := decisionsig.Decode(sig)
		if err != nil {
			return &verdict{Problem: err.Error()}
		}
		return &verdict{KeyID: s.KeyID, Problem: "not verified: give --trust FILE (or " + trustListEnv + ")"}
	}
	s, e, err := audit(tl)
	if s == nil {
		if err == nil {
			return nil
		}
		return &verdict{Problem: err.Error()}
	}
	v := &verdict{KeyID: s.KeyID, Name: e.Name}
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	v.Verified = true
	return v
}

// String is the verdict as show and audit print it.
func (v *verdict) String() string {
	s := cell(v.KeyID)
	if v.Name != "" {
		s += " (" + cell(v.Name) + ")"
	}
	if v.Verified {
		return s + ", verified"
	}
	if v.KeyID == "" {
		return "unreadable: " + cell(v.Problem)
	}
	return s + ", " + cell(v.Problem)
}

// approvalVerdict re-verifies the signed decision stored with ap.
func approvalVerdict(tl *decisionsig.TrustList, ap *oncekeystore.Approval) *verdict {
	return verdictOf(tl, ap.Signature, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditApproval(tl, ap)
	})
}

// signersView is every signer of an approval that asked for more than one
// (ApprovalPolicy.Signers), in the order they signed, as reconcile.AuditApprovalSigners found
// them: Text says where they stand ("2 of 2 signers", "1 of 2: waiting for another signer").
type signersView struct {
	Text    string       `json:"text,omitempty"`
	Signers []signerView `json:"signers"`
}

// signerView is one signer: who (the key, its name in the trust list, the decider), when, what
// (a partial approval, or the decision that settled the request), and whether it verifies.
type signerView struct {
	verdict
	Kind      decisionsig.Kind `json:"kind,omitempty"`
	DecidedBy string           `json:"decided_by,omitempty"`
	SignedAt  time.Time        `json:"signed_at,omitzero"`
	// Decision: the decision's signature (the last approval, or a denial), not a partial one.
	Decision bool `json:"decision,omitempty"`
	// Repeat: a key or a decider an earlier signer has; it counts once.
	Repeat bool `json:"repeat,omitempty"`
}

// approvalSigners re-verifies each signer of ap (reconcile.AuditApprovalSigners); nil for an
// approval without partial approvals.
func approvalSigners(tl *decisionsig.TrustList, ap *oncekeystore.Approval) *signersView {
	a := reconcile.AuditApprovalSigners(tl, ap)
	if a == nil {
		return nil
	}
	out := &signersView{Text: a.Text(tl != nil), Signers: make([]signerView, 0, len(a.Signers))}
	for _, s := range a.Signers {
		v := signerView{Decision: s.Decision, Repeat: s.Repeat}
		switch {
		case s.Signed == nil:
			v.Problem = "unreadable: " + fmt.Sprint(s.Err)
		default:
			v.KeyID, v.Name, v.Verified = s.Signed.KeyID, s.Entry.Name, s.Verified
			v.Kind, v.DecidedBy, v.SignedAt = s.Signed.Statement.Kind, s.Signed.Statement.DecidedBy, s.Signed.Statement.SignedAt.UTC()
			switch {
			case tl == nil:
				v.Problem = "not verified: give --trust FILE (or " + trustListEnv + ")"
			case s.Err != nil:
				v.Problem = s.Err.Error()
			}
		}
		out.Signers = append(out.Signers, v)
	}
	return out
}

// String is the signer as show and audit print it: "ed25519:… (ada), verified; approved by ada
// at 2026-12-05T08:00:00Z" (denied, changes requested: the decision that settled it instead).
func (v *signerView) String() string {
	if v.KeyID == "" {
		return v.verdict.String()
	}
	what := "approved"
	switch v.Kind {
	case decisionsig.Deny:
		what = "denied"
	case decisionsig.RequestChanges:
		what = "changes requested"
	}
	s := v.verdict.String() + "; " + what + " by " + cell(v.DecidedBy)
	if !v.SignedAt.IsZero() {
		s += " at " + v.SignedAt.Format(time.RFC3339)
	}
	if v.Repeat {
		s += " (a signer already counted: counts once)"
	}
	return s
}

// resolutionVerdict re-verifies the signed resolution stored with rec (sig).
func resolutionVerdict(tl *decisionsig.TrustList, rec *oncekeystore.Record, sig []byte) *verdict {
	return verdictOf(tl, sig, func(tl *decisionsig.TrustList) (*decisionsig.Signed, decisionsig.Entry, error) {
		return reconcile.AuditResolution(tl, rec, sig)
	})
}

// resolutionSignature reads the signed resolution kept with key's record; nil when the store
// keeps none (or is at a schema before it).
func resolutionSignature(ctx context.Context, s oncekeystore.Store, tenant, key string) []byte {
	ss, ok := s.(oncekeystore.SignatureStore)
	if !ok {
		return nil
	}
	b, err := ss.ResolutionSignature(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	if err != nil {
		return nil
	}
	return b
}

func newKeysCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Make the key pair a person signs decisions with, or the deployment's header key",
		Args:  cobra.NoArgs,
	}
	var out, name string
	gen := &cobra.Command{
		Use:   "gen --out FILE [--name NAME]",
		Short: "Make an ed25519 key pair: the private key into FILE, the trust list entry of its public key on stdout",
		Long: "gen writes a new ed25519 private key (PEM, PKCS #8) to FILE, readable by you only, and prints its key ID and the\n" +
			"entry of its public key for the workers' trust list file (okworker.Options.TrustList): add it to the file's \"keys\",\n" +
			"narrow its tenants, tools and kinds to what this person decides, and rename the new file over the old one: the\n" +
			"workers read it again, with no restart. Sign with it: `oncekey approve|deny|resolve --sign-key FILE`.",
		Example: "  oncekey keys gen --out ~/.oncekey/ada.pem --name ada",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fail(exitUsage, "give --out FILE: where to write the private key")
			}
			priv, pub, id, err := decisionsig.GenerateKey()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fail(exitUsage, "--out: %v; nothing was written (a key file is never overwritten)", err)
			}
			if _, err := f.Write(priv); err != nil {
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			entry := map[string]any{"id": id, "public_key": pub, "tenants": []string{decisionsig.Any}, "tools": []string{decisionsig.Any},
				"kinds": []decisionsig.Kind{decisionsig.Approve, decisionsig.ApproveEdited, decisionsig.Deny, decisionsig.RequestChanges, decisionsig.Resolve,
					decisionsig.GrantCreate, decisionsig.GrantRevoke}}
			if name != "" {
				entry["name"] = name
			}
			b, err := json.MarshalIndent(entry, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote the private key %s to %s (keep it to yourself)\n", id, out)
			fmt.Fprintf(a.stdout, "the trust list entry of its public key (narrow tenants, tools and kinds):\n%s\n", b)
			return nil
		},
	}
	gen.Flags().StringVar(&out, "out", "", "write the private key to `FILE` (created, never overwritten)")
	gen.Flags().StringVar(&name, "name", "", "who holds the key, for the trust list entry")
	cmd.AddCommand(gen, newHeaderGenCmd(a))
	return cmd
}

// newHeaderGenCmd is `oncekey keys header-gen`: a new header key (okworker.Options.HeaderKeys)
// appended to a file of keys.
func newHeaderGenCmd(a *app) *cobra.Command {
	var id, out string
	cmd := &cobra.Command{
		Use:   "header-gen --id ID --out FILE",
		Short: "Make a header key (okworker.Options.HeaderKeys): a line \"ID SECRET\" appended to FILE",
		Long: "header-gen makes a 32-byte random secret and appends the line \"ID BASE64SECRET\" to FILE (created readable by you\n" +
			"only), which oncekey.LoadHeaderKeys reads: the first key of the file binds a call's tenant and step ID headers on\n" +
			"the workflow workers, and every key verifies on the activity workers. Give the file to every worker of the\n" +
			"deployment. To rotate: append the new key (second) everywhere, then move its line first, then drop the old line,\n" +
			"one rolling deploy each.",
		Example: "  oncekey keys header-gen --id deploy-2 --out /etc/oncekey/header-keys",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fail(exitUsage, "give --out FILE: the file of header keys to append the new key to")
			}
			k := oncekey.HeaderKey{ID: id, Secret: make([]byte, oncekey.MinHeaderKeyBytes)}
			if _, err := rand.Read(k.Secret); err != nil {
				return err
			}
			if err := k.Check(); err != nil {
				return fail(exitUsage, "--id: %v; nothing was written", err)
			}
			var existing []byte
			if b, err := os.ReadFile(out); err == nil {
				keys, perr := oncekey.ParseHeaderKeys(b)
				if perr != nil && len(bytes.TrimSpace(b)) > 0 && !onlyComments(b) {
					return fail(exitUsage, "--out: %s does not read as a file of header keys (%v); nothing was written", out, perr)
				}
				for _, e := range keys {
					if e.ID == id {
						return fail(exitUsage, "--id: %s already has a key %s; nothing was written (give the new key another ID)", out, id)
					}
				}
				existing = b
			} else if !errors.Is(err, os.ErrNotExist) {
				return fail(exitUsage, "--out: %v; nothing was written", err)
			}
			line := id + " " + base64.StdEncoding.EncodeToString(k.Secret) + "\n"
			if len(existing) > 0 && existing[len(existing)-1] != '\n' {
				line = "\n" + line
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return fail(exitUsage, "--out: %v; nothing was written", err)
			}
			if _, err := f.WriteString(line); err != nil {
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			where := "last"
			if len(existing) == 0 || onlyComments(existing) {
				where = "first: the key workflow workers bind with"
			}
			fmt.Fprintf(a.stdout, "appended the header key %s to %s (%s); give every worker of the deployment the same file (okworker.Options.HeaderKeys, oncekey.LoadHeaderKeys) and no one else\n", id, out, where)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the key's `ID`: 1 to 32 characters of A-Z, a-z, 0-9, '.', '_' and '-' (it names the key in bindings)")
	cmd.Flags().StringVar(&out, "out", "", "append the key to `FILE` (created with mode 0600 when missing)")
	return cmd
}

// onlyComments reports whether b holds nothing but blank lines and comments.
func onlyComments(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func newAuditCmd(a *app) *cobra.Command {
	var tenant, trust string
	cmd := &cobra.Command{
		Use:   "audit KEY [--tenant T] [--trust FILE]",
		Short: "Re-verify the signed decisions stored with an operation: its approval's and its resolution's",
		Long: "audit reads KEY's approval and record from the store and re-verifies, from them alone, the signed decision stored\n" +
			"with each against the trust list (--trust, else " + trustListEnv + "): that the signature verifies, that its key was\n" +
			"trusted for the decision's tenant, tool and kind when it was signed (a key revoked since is reported), and that the\n" +
			"signed statement is exactly the decision stored. It exits 0 when every decision a person made is signed and verifies,\n" +
			"1 otherwise, naming what does not.",
		Example: "  oncekey audit ok1_3f2a… --tenant acme --trust /etc/oncekey/trust.json",
		Args:    a.keyArgs("oncekey audit KEY --tenant T --trust FILE", "list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := strings.TrimSpace(args[0])
			tenantGiven := tenant != ""
			if !tenantGiven {
				tenant = a.ns()
			}
			tl, err := a.trustList(trust)
			if err != nil {
				return err
			}
			if tl == nil {
				return fail(exitUsage, "give --trust FILE (or %s): the trust list to verify against", trustListEnv)
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, s recordStore) error {
				r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
				if err != nil && !errors.Is(err, oncekeystore.ErrNotFound) {
					return a.storeError("audit "+key, err)
				}
				ap, err := getApproval(ctx, s, tenant, key)
				if err != nil {
					return a.storeError("audit "+key+": approval", err)
				}
				if r == nil && ap == nil {
					return a.recordNotFound(key, tenant, tenantGiven)
				}
				bad := 0
				report := func(what string, v *verdict, madeByPerson bool) {
					switch {
					case v == nil && madeByPerson:
						bad++
						fmt.Fprintf(a.stdout, "%s: not signed\n", what)
					case v == nil:
						fmt.Fprintf(a.stdout, "%s: no person's decision to verify\n", what)
					default:
						if !v.Verified {
							bad++
						}
						fmt.Fprintf(a.stdout, "%s: signed by %s\n", what, v)
					}
				}
				if ap != nil {
					if sv := approvalSigners(tl, ap); sv != nil {
						// Four eyes: each partial approval, in the order signed, then the decision.
						for i, sg := range sv.Signers {
							if !sg.Verified {
								bad++
							}
							fmt.Fprintf(a.stdout, "approval episode %d, signer %d: signed by %s\n", ap.Episode, i+1, &sg)
						}
						if sv.Text != "" {
							fmt.Fprintf(a.stdout, "approval episode %d: %s\n", ap.Episode, sv.Text)
						}
					} else {
						person := ap.Status != oncekeystore.ApprovalPending && ap.Status != oncekeystore.ApprovalTimedOut
						report(fmt.Sprintf("approval episode %d, %s by %s", ap.Episode, ap.Status, cell(ap.DecidedBy)), approvalVerdict(tl, ap), person)
					}
				}
				if r != nil {
					sig := resolutionSignature(ctx, s, tenant, key)
					resolved := r.ResolvedBy != "" && !strings.HasPrefix(r.ResolvedBy, "receipt:")
					report(fmt.Sprintf("record epoch %d, %s by %s", r.Epoch, r.Status, cell(r.ResolvedBy)), resolutionVerdict(tl, r, sig), resolved)
				}
				if bad > 0 {
					return fail(exitFailed, "%d stored decision(s) of %s are not signed by a trusted key as stored", bad, key)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the operation's tenant (default: the namespace)")
	cmd.Flags().StringVar(&trust, "trust", "", "the trust list `FILE` to verify against (default: "+trustListEnv+")")
	return cmd
}
