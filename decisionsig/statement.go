package decisionsig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/oncekey/oncekey/canonical"
)

// Version is the Statement format this package signs and verifies (Statement.Version).
const Version = 1

// Kind is the kind of decision a Statement makes. A TrustList entry names the kinds its key may
// sign.
type Kind string

const (
	// Approve lets the call an approval was asked for run (ApprovalApproved).
	Approve Kind = "approve"
	// ApproveEdited lets the call run with other arguments, the edit (ApprovalReplaced);
	// Statement.ArgumentsDigest binds the edited arguments.
	ApproveEdited Kind = "approve_edited"
	// Deny refuses the call (ApprovalDenied).
	Deny Kind = "deny"
	// RequestChanges refuses the call and asks the model for other arguments (ApprovalDenied
	// with ChangesRequested).
	RequestChanges Kind = "request_changes"
	// Resolve settles an unknown outcome (reconcile.Resolution); Statement.Outcome and
	// ResultDigest bind what it says happened.
	Resolve Kind = "resolve"
	// GrantCreate makes a standing grant (oncekeystore.CreateGrantParams): Statement.WorkflowID,
	// Rule and DurationSeconds bind what it covers and for how long.
	GrantCreate Kind = "grant_create"
	// GrantRevoke revokes a standing grant (oncekeystore.RevokeGrantParams): Statement.GrantID
	// names the grant, with its namespace, tenant and tool.
	GrantRevoke Kind = "grant_revoke"
)

// Valid reports whether k is one of the Kind constants.
func (k Kind) Valid() bool {
	switch k {
	case Approve, ApproveEdited, Deny, RequestChanges, Resolve, GrantCreate, GrantRevoke:
		return true
	}
	return false
}

// Statement is exactly what a decision decides, the message a decider signs: its canonical JSON
// (Bytes) is what the signature covers, so a member added, dropped or changed breaks it. Members
// a kind does not use are empty and left out of the JSON.
//
// Its JSON is a persisted format (stored with the decision, read back by `oncekey audit`),
// pinned by TestStatementVector: changing it is a BREAKING CHANGE.
type Statement struct {
	// Version is the format, Version (1).
	Version int `json:"v"`
	// Kind is the decision.
	Kind Kind `json:"kind"`
	// Namespace, Tenant, OperationKey and Tool name the operation decided on (a grant: the
	// calls it covers, and no operation key).
	Namespace    string `json:"namespace"`
	Tenant       string `json:"tenant"`
	OperationKey string `json:"operation_key"`
	Tool         string `json:"tool"`
	// WorkflowID, Rule and DurationSeconds are, for GrantCreate, the grant's workflow (""
	// for every workflow of the tenant), rule and duration in whole seconds.
	WorkflowID      string `json:"workflow_id,omitempty"`
	Rule            string `json:"rule,omitempty"`
	DurationSeconds int64  `json:"duration_seconds,omitempty"`
	// GrantID is, for GrantRevoke, the ID of the grant revoked (oncekeystore.Grant.ID).
	GrantID string `json:"grant_id,omitempty"`
	// Episode and RequestToken name the approval request decided (oncekeystore.Approval.Episode
	// and Token); empty for a resolution.
	Episode      int64  `json:"episode,omitempty"`
	RequestToken string `json:"request_token,omitempty"`
	// Fingerprint is the fingerprint of the call the approval was asked for; empty for a
	// resolution.
	Fingerprint string `json:"fingerprint,omitempty"`
	// ArgumentsDigest is, for ApproveEdited, Digest of the edited arguments.
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// Epoch is, for Resolve, the record's epoch the resolution is for.
	Epoch int64 `json:"epoch,omitempty"`
	// Outcome is, for Resolve, what happened: "applied", "not_applied" or "failed".
	Outcome string `json:"outcome,omitempty"`
	// ResultDigest is, for Resolve, Digest of the result given with an applied outcome; empty
	// without one.
	ResultDigest string `json:"result_digest,omitempty"`
	// EffectReference is, for Resolve, the effect reference given.
	EffectReference string `json:"effect_reference,omitempty"`
	// Reason is a decision's reason or a resolution's note; Message an approval decision's
	// message for the model.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// DecidedBy is who decided, as recorded with the decision (Approval.DecidedBy,
	// Record.ResolvedBy).
	DecidedBy string `json:"decided_by"`
	// SignedAt is when the decider signed, on the decider's clock, in UTC to the second.
	SignedAt time.Time `json:"signed_at"`
}

// Bytes returns the canonical JSON of s (RFC 8785, package canonical): what a signature covers.
func (s Statement) Bytes() ([]byte, error) {
	b, err := canonical.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("decisionsig: encode statement: %w", err)
	}
	return b, nil
}

// Digest returns the hex SHA-256 of the canonical JSON of the JSON document doc: how a
// Statement binds edited arguments and a resolution's result. Two documents that differ only in
// spacing or member order have one digest. "" for an empty doc; an error for one that is not
// JSON.
func Digest(doc []byte) (string, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return "", nil
	}
	c, err := canonical.Transform(doc)
	if err != nil {
		return "", fmt.Errorf("decisionsig: digest: %w", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// mismatch names the first member in which got differs from want ("" when none), comparing
// every member but SignedAt, and want's Version only when set.
func mismatch(got, want Statement) string {
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	t := gv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == "SignedAt" || (f.Name == "Version" && want.Version == 0) {
			continue
		}
		if !gv.Field(i).Equal(wv.Field(i)) {
			name, _, _ := bytes.Cut([]byte(f.Tag.Get("json")), []byte(","))
			return string(name)
		}
	}
	return ""
}

// Signed is a Statement with its signature: what is sent with a decision and stored with it.
// Its JSON (Encode) is a persisted format, pinned by TestSignedVector: changing it is a
// BREAKING CHANGE.
type Signed struct {
	Statement Statement `json:"statement"`
	// KeyID names the signing key (KeyID of its public key).
	KeyID string `json:"key_id"`
	// Signature is the ed25519 signature of Statement.Bytes(), base64 in JSON.
	Signature []byte `json:"signature"`
}

// Encode returns the canonical JSON of s, as it is stored with a decision.
func (s *Signed) Encode() ([]byte, error) {
	b, err := canonical.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("decisionsig: encode signed statement: %w", err)
	}
	return b, nil
}

// Decode reads a Signed from its JSON (Encode's), refusing unknown members. Empty b is nil,
// nil: an unsigned decision.
func Decode(b []byte) (*Signed, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var s Signed
	if err := d.Decode(&s); err != nil {
		return nil, &Error{Reason: ReasonBadSignature, Detail: "the signed statement does not decode: " + err.Error()}
	}
	return &s, nil
}
