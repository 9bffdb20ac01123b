package oncekeystore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"time"
)

// A standing grant approves the calls of one tool ahead of time: every call of Tool in
// Namespace and Tenant (and, with WorkflowID, of that workflow only) whose arguments match Rule,
// from CreatedAt until ExpiresAt or until it is revoked. The worker that would ask a person for
// such a call records the approval itself instead, decided by the grant's CreatedBy and naming
// the grant (Approval.GrantID), and runs the call without waiting. A grant is never edited:
// revoke it and make another.
type Grant struct {
	// ID names the grant ("g1_" and 32 hex digits), chosen by the store.
	ID        string
	Namespace string
	Tenant    string
	Tool      string
	// WorkflowID, when not "", limits the grant to the calls of that workflow; "" covers every
	// workflow of the tenant.
	WorkflowID string
	// Rule is the condition on the call's arguments (ParseGrantRule), "" for every call.
	Rule string
	// CreatedBy is who made the grant (self-asserted, as Approval.DecidedBy); Reason says why.
	CreatedBy string
	Reason    string
	// CreatedAt and ExpiresAt are on the store's clock: the grant covers calls checked in
	// [CreatedAt, ExpiresAt).
	CreatedAt time.Time
	ExpiresAt time.Time
	// RevokedAt and RevokedBy say when and by whom it was revoked; zero while it is not.
	RevokedAt time.Time
	RevokedBy string
	// Status is the grant's status as the store read it, on its clock: GrantActive, GrantRevoked
	// or GrantExpired.
	Status GrantStatus
	// Signature is the signed statement of the grant's making (CreateGrantParams.Signature),
	// opaque to the store; nil for a grant made unsigned.
	Signature []byte
	// RevocationSignature is the signed statement of its revocation (RevokeGrantParams.Signature),
	// opaque to the store; nil while it is not revoked, or for a revocation made unsigned.
	RevocationSignature []byte
}

// GrantStatus is the state of a grant as it reads at a time.
type GrantStatus string

const (
	// GrantActive: not revoked, not expired; it covers the calls it names.
	GrantActive GrantStatus = "active"
	// GrantRevoked: someone revoked it; it covers nothing.
	GrantRevoked GrantStatus = "revoked"
	// GrantExpired: its ExpiresAt passed; it covers nothing.
	GrantExpired GrantStatus = "expired"
	// GrantEnded is not a status but a filter of ListGrantsParams.Status: the grants that read
	// GrantRevoked or GrantExpired.
	GrantEnded GrantStatus = "ended"
)

// DefaultGrantRetention is CreateGrantParams.Retention when it is zero: an ended grant is kept
// 30 days, for the audit of the approvals it decided, then Purge deletes it.
const DefaultGrantRetention = 30 * 24 * time.Hour

// ReadAsOf sets g.Status to how g reads at now (the store's clock). Stores call it on each grant
// they return.
func (g *Grant) ReadAsOf(now time.Time) {
	switch {
	case !g.RevokedAt.IsZero():
		g.Status = GrantRevoked
	case !now.Before(g.ExpiresAt):
		g.Status = GrantExpired
	default:
		g.Status = GrantActive
	}
}

// Scope reports whether g names the call of tool in namespace, tenant and workflowID, whatever
// its status and rule: the same namespace, tenant and tool, and g.WorkflowID "" or workflowID.
func (g *Grant) Scope(namespace, tenant, tool, workflowID string) bool {
	return g.Namespace == namespace && g.Tenant == tenant && g.Tool == tool && (g.WorkflowID == "" || g.WorkflowID == workflowID)
}

// GrantReason is Approval.Reason of an approval a grant decided.
func GrantReason(id string) string { return "standing grant " + id }

// NewGrantID returns a fresh grant ID ("g1_" and 32 hex digits); stores call it in CreateGrant.
func NewGrantID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "g1_" + hex.EncodeToString(b[:])
}

// GrantStore is implemented by the stores that keep standing grants beside approvals (pgstore,
// memstore, redisstore). A worker whose store implements it approves the calls a live grant
// covers without asking a person; with a store that does not, every call asks. Implementations
// must pass storetest.RunGrants (storetest.Run runs it for them).
type GrantStore interface {
	// CreateGrant makes a grant, active from now until now + p.Duration on the store's clock,
	// and returns it. p.Rule must parse (ParseGrantRule); the store does not know the tool's input
	// type, so check it against that first (Registry.CheckGrantRule).
	CreateGrant(ctx context.Context, p *CreateGrantParams) (*Grant, error)
	// RevokeGrant revokes the grant p.ID: from the moment it is written, no approval is recorded
	// under it (ApproveByGrant refuses) and the worker no longer runs a call on an approval it
	// recorded (it checks the grant again right before the effect). A grant revoked or expired
	// already is returned unchanged (check Status and RevokedBy). No grant: ErrNotFound.
	RevokeGrant(ctx context.Context, p *RevokeGrantParams) (*Grant, error)
	// GetGrant returns the grant id as it reads now, or ErrNotFound.
	GetGrant(ctx context.Context, id string) (*Grant, error)
	// ListGrants returns a page of the grants matching p's non-zero fields, oldest first
	// (CreatedAt, then ID), at most p.PageSize() of them, after p.Cursor, and the cursor of the
	// next page. The filters are applied by the store, so a page is full unless it is the last;
	// a lookup of the active grants of one scope (Namespace, Tenant, Tool and Status GrantActive:
	// the worker's) reads only that scope's active grants, however many other grants the store
	// keeps. A malformed cursor is an *InvalidParamsError.
	ListGrants(ctx context.Context, p *ListGrantsParams) (*ListGrantsResult, error)
	// ApproveByGrant decides the pending approval at p.Episode asked by the request p.Token
	// names as approved under the grant p.GrantID: DecidedBy the grant's CreatedBy, Reason
	// GrantReason(p.GrantID), GrantID p.GrantID, ExpiresAt now + p.Retention. The grant must be
	// active and its scope (Grant.Scope) must name the approval's namespace, tenant, tool and
	// p.WorkflowID; otherwise nothing is written and the error is a *GrantNotActiveError (it
	// carries the grant as it reads). Stores check the grant and write the decision in one step
	// where they can (memstore, pgstore): a revoke lands before or after it, never inside. The
	// approval's errors are DecideApproval's (ErrNotFound, *StaleDecisionError,
	// *ApprovalConflictError).
	ApproveByGrant(ctx context.Context, p *ApproveByGrantParams) (*Approval, error)
}

// CreateGrantParams are the arguments of GrantStore.CreateGrant.
type CreateGrantParams struct {
	Namespace, Tenant, Tool string
	// WorkflowID, when not "", limits the grant to that workflow.
	WorkflowID string
	// Rule is the condition on the arguments (ParseGrantRule); "" covers every call.
	Rule string
	// CreatedBy is who makes the grant. Required.
	CreatedBy string
	Reason    string
	// Duration is how long the grant lasts, from now on the store's clock. Required, at most
	// MaxGrantDuration.
	Duration time.Duration
	// Retention is how long the grant is kept once it has ended (expired or revoked), for the
	// audit of the approvals it decided; then Purge deletes it. Defaults to
	// DefaultGrantRetention (30 days).
	Retention time.Duration
	// Signature is the signed statement of the grant (decisionsig.Signed's JSON, made by
	// reconcile.SignGrant), stored as Grant.Signature; at most MaxSignatureBytes. Optional; workers
	// with a trust list apply only grants whose signature verifies.
	Signature []byte
}

// KeepFor returns p.Retention, or DefaultGrantRetention when it is zero.
func (p *CreateGrantParams) KeepFor() time.Duration {
	if p.Retention == 0 {
		return DefaultGrantRetention
	}
	return p.Retention
}

// MaxGrantDuration is the longest a grant may last: 90 days. A grant is a standing decision
// nobody sees again; make a new one when it ends.
const MaxGrantDuration = 90 * 24 * time.Hour

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *CreateGrantParams) Validate() error {
	const op = "create grant"
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"Namespace", p.Namespace, true}, {"Tenant", p.Tenant, true}, {"Tool", p.Tool, true},
		{"WorkflowID", p.WorkflowID, false}, {"CreatedBy", p.CreatedBy, true}, {"Reason", p.Reason, false},
	} {
		if err := checkText(op, f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if _, err := ParseGrantRule(p.Rule); err != nil {
		return &InvalidParamsError{Op: op, Field: "Rule", Reason: err.Error()}
	}
	if err := checkPositive(op, "Duration", p.Duration); err != nil {
		return err
	}
	if p.Duration > MaxGrantDuration {
		return &InvalidParamsError{Op: op, Field: "Duration", Reason: fmt.Sprintf("%s is longer than %s", p.Duration, MaxGrantDuration)}
	}
	if p.Retention < 0 {
		return &InvalidParamsError{Op: op, Field: "Retention", Reason: fmt.Sprintf("%s is negative", p.Retention)}
	}
	return checkSignature(op, p.Signature)
}

// RevokeGrantParams are the arguments of GrantStore.RevokeGrant.
type RevokeGrantParams struct {
	ID string
	// RevokedBy is who revokes it. Required.
	RevokedBy string
	// Signature is the signed statement of the revocation (decisionsig.Signed's JSON, made by
	// reconcile.SignRevocation), stored as Grant.RevocationSignature; at most MaxSignatureBytes.
	// Optional: a revocation always ends the grant; workers with a trust list report one whose
	// signature does not verify.
	Signature []byte
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *RevokeGrantParams) Validate() error {
	if err := checkText("revoke grant", "ID", p.ID, true); err != nil {
		return err
	}
	if err := checkText("revoke grant", "RevokedBy", p.RevokedBy, true); err != nil {
		return err
	}
	return checkSignature("revoke grant", p.Signature)
}

// ListGrantsParams are the arguments of GrantStore.ListGrants. Zero fields do not filter.
type ListGrantsParams struct {
	Namespace, Tenant, Tool string
	// Status keeps the grants that read so now; GrantEnded keeps the revoked and the expired
	// ones; "" keeps all.
	Status GrantStatus
	// Cursor resumes a listing after the page whose ListGrantsResult.Next it is; "" starts at
	// the oldest grant.
	Cursor string
	// Limit is the most grants returned. Defaults to 100; at most 10,000.
	Limit int
}

// ListGrantsResult is a page of GrantStore.ListGrants.
type ListGrantsResult struct {
	Grants []*Grant
	// Next is the cursor of the next page, "" after the last page.
	Next string
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil. The cursor is
// checked by After.
func (p *ListGrantsParams) Validate() error {
	switch p.Status {
	case "", GrantActive, GrantRevoked, GrantExpired, GrantEnded:
	default:
		return &InvalidParamsError{Op: "list grants", Field: "Status", Reason: fmt.Sprintf("%q is not active, revoked, expired or ended", p.Status)}
	}
	if err := checkOptional("list grants", "Namespace", p.Namespace); err != nil {
		return err
	}
	if err := validateListFilter("list grants", p.Tenant, p.Tool, "", p.Cursor, p.Limit); err != nil {
		return err
	}
	_, err := p.After()
	return err
}

// PageSize returns p.Limit, or DefaultListLimit when it is zero.
func (p *ListGrantsParams) PageSize() int { return pageSize(p.Limit) }

// GrantCursor is where ListGrants' keyset pagination resumes: the sort key (created at, ID) of
// the last grant of a page. Stores hand it out as ListGrantsResult.Next with NextGrantCursor
// and read ListGrantsParams.Cursor with After; to callers it is an opaque string.
type GrantCursor struct {
	CreatedAt time.Time
	ID        string
}

// NextGrantCursor returns the cursor that resumes a listing of grants after g.
func NextGrantCursor(g *Grant) string { return encodeCursor(g.CreatedAt, "", g.ID) }

// After returns the cursor p.Cursor names, or nil when it is "" (the first page). A cursor
// NextGrantCursor did not make is an *InvalidParamsError.
func (p *ListGrantsParams) After() (*GrantCursor, error) {
	return cursorAfter(p.Cursor, func(s string) (GrantCursor, error) {
		at, _, id, err := decodeCursor("list grants", s)
		return GrantCursor{CreatedAt: at, ID: id}, err
	})
}

// Before reports whether c sorts before g in ListGrants' order (created at, ID).
func (c GrantCursor) Before(g *Grant) bool {
	return sortsBefore(c.CreatedAt, "", c.ID, g.CreatedAt, "", g.ID)
}

// Matches reports whether g (as it reads) passes p's filters.
func (p *ListGrantsParams) Matches(g *Grant) bool {
	status := p.Status == "" || g.Status == p.Status || p.Status == GrantEnded && g.Status != GrantActive
	return (p.Namespace == "" || g.Namespace == p.Namespace) && (p.Tenant == "" || g.Tenant == p.Tenant) &&
		(p.Tool == "" || g.Tool == p.Tool) && status
}

// Page returns the page of gs that ListGrants returns for p: the grants that pass p's filters
// and sort after p.Cursor, oldest first (CreatedAt, then ID), at most p.PageSize() of them, and
// the next cursor. Stores that filter in memory (memstore, and redisstore over an index) use it.
// p must be valid.
func (p *ListGrantsParams) Page(gs []*Grant) *ListGrantsResult {
	after, _ := p.After()
	var out []*Grant
	for _, g := range gs {
		if p.Matches(g) && (after == nil || after.Before(g)) {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return sortsBefore(out[i].CreatedAt, "", out[i].ID, out[j].CreatedAt, "", out[j].ID)
	})
	res := &ListGrantsResult{Grants: out}
	if len(out) > p.PageSize() {
		res.Grants = out[:p.PageSize()]
		res.Next = NextGrantCursor(res.Grants[len(res.Grants)-1])
	}
	return res
}

// ApproveByGrantParams are the arguments of GrantStore.ApproveByGrant.
type ApproveByGrantParams struct {
	Tenant, OperationKey string
	// Episode and Token name the pending request decided, as for DecideApprovalParams.
	Episode int64
	Token   string
	// GrantID names the grant that covers the call; WorkflowID is the call's workflow, which the
	// grant's scope must name.
	GrantID    string
	WorkflowID string
	// Retention is how long the decided approval is kept, from now. Required.
	Retention time.Duration
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *ApproveByGrantParams) Validate() error {
	const op = "approve by grant"
	if err := checkTarget(op, p.Tenant, p.OperationKey, "Episode", p.Episode, "is not an episode"); err != nil {
		return err
	}
	if err := checkText(op, "GrantID", p.GrantID, true); err != nil {
		return err
	}
	if err := checkOptional(op, "Token", p.Token, "WorkflowID", p.WorkflowID); err != nil {
		return err
	}
	return checkPositive(op, "Retention", p.Retention)
}

// GrantNotActiveError: ApproveByGrant found the grant revoked, expired, gone (Grant nil) or not
// naming the call (another namespace, tenant, tool or workflow). Nothing was written.
type GrantNotActiveError struct {
	GrantID string
	Grant   *Grant
	// Reason says which: "revoked", "expired", "not found" or "another scope".
	Reason string
}

func (e *GrantNotActiveError) Error() string {
	s := "oncekey: the grant " + e.GrantID + " covers nothing here (" + e.Reason
	if g := e.Grant; g != nil && g.Status == GrantRevoked {
		s += " by " + g.RevokedBy + " at " + g.RevokedAt.UTC().Format(time.RFC3339)
	}
	return s + "); nothing was approved"
}

// NotActive returns the *GrantNotActiveError of approving under g (nil: not found) the call of
// tool in namespace, tenant and workflowID, or nil when g covers it. g reads as of the store's
// now (ReadAsOf).
func NotActive(id string, g *Grant, namespace, tenant, tool, workflowID string) *GrantNotActiveError {
	switch {
	case g == nil:
		return &GrantNotActiveError{GrantID: id, Reason: "not found"}
	case g.Status == GrantRevoked, g.Status == GrantExpired:
		return &GrantNotActiveError{GrantID: id, Grant: g, Reason: string(g.Status)}
	case !g.Scope(namespace, tenant, tool, workflowID):
		return &GrantNotActiveError{GrantID: id, Grant: g, Reason: "another scope"}
	}
	return nil
}

// GrantApproval returns a, a pending approval, as ApproveByGrant writes it at now under g.
func GrantApproval(a Approval, g *Grant, now time.Time, retention time.Duration) Approval {
	a.Status, a.DecidedAt, a.DecidedBy, a.Reason = ApprovalApproved, now, g.CreatedBy, GrantReason(g.ID)
	a.ExpiresAt, a.GrantID = now.Add(retention), g.ID
	return a
}
