package oncekeystore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/oncekey/oncekey/internal/textcheck"
)

// InvalidParamsError: a Store method was called with bad arguments (an empty key, a negative
// lease, a Complete with a status other than applied or failed, text that is not valid UTF-8,
// a malformed cursor). Nothing was read or written. Field names the bad field.
type InvalidParamsError struct {
	Op     string
	Field  string
	Reason string
}

func (e *InvalidParamsError) Error() string {
	return fmt.Sprintf("oncekey: %s: invalid %s: %s", e.Op, e.Field, e.Reason)
}

// MaxListLimit is the largest page ListParams.Limit may ask for.
const MaxListLimit = 10000

// DefaultListLimit is the page size when ListParams.Limit is zero.
const DefaultListLimit = 100

func checkText(op, field, v string, required bool) error {
	if required && strings.TrimSpace(v) == "" {
		return &InvalidParamsError{Op: op, Field: field, Reason: "must not be empty"}
	}
	if reason := textcheck.Problem(v, 0); reason != "" {
		return &InvalidParamsError{Op: op, Field: field, Reason: reason}
	}
	return nil
}

func checkFenced(op, tenant, key string, epoch int64) error {
	return checkTarget(op, tenant, key, "Epoch", epoch, "is not a claimed epoch")
}

// checkTarget checks the tenant and operation key a write names, and the epoch (or an
// approval's episode: field) it is fenced by; an epoch under 1 is refused with "<epoch> <why>".
func checkTarget(op, tenant, key, field string, epoch int64, why string) error {
	if err := checkText(op, "Tenant", tenant, true); err != nil {
		return err
	}
	if err := checkText(op, "OperationKey", key, true); err != nil {
		return err
	}
	if epoch < 1 {
		return &InvalidParamsError{Op: op, Field: field, Reason: fmt.Sprintf("%d %s", epoch, why)}
	}
	return nil
}

// checkOptional checks optional text fields, given as name and value pairs.
func checkOptional(op string, nameValue ...string) error {
	for i := 0; i+1 < len(nameValue); i += 2 {
		if err := checkText(op, nameValue[i], nameValue[i+1], false); err != nil {
			return err
		}
	}
	return nil
}

func checkPositive(op, field string, d time.Duration) error {
	if d <= 0 {
		return &InvalidParamsError{Op: op, Field: field, Reason: fmt.Sprintf("%s must be positive", d)}
	}
	return nil
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil. Stores call it
// before touching anything.
func (p *ClaimParams) Validate() error {
	const op = "claim"
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"Tenant", p.Tenant, true}, {"OperationKey", p.OperationKey, true}, {"Namespace", p.Namespace, false}, {"Tool", p.Tool, true},
		{"Version", p.Version, false}, {"Fingerprint", p.Fingerprint, true},
		{"WorkflowID", p.WorkflowID, false}, {"StepID", p.StepID, false},
	} {
		if err := checkText(op, f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if !p.Effect.Claimed() {
		return &InvalidParamsError{Op: op, Field: "Effect", Reason: fmt.Sprintf("%s is not claimed (want idempotent, effectful or transactional)", p.Effect)}
	}
	if err := checkPositive(op, "Lease", p.Lease); err != nil {
		return err
	}
	if err := checkPositive(op, "Retention", p.Retention); err != nil {
		return err
	}
	return checkPositive(op, "Tombstone", p.Tombstone)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *RenewParams) Validate() error {
	if err := checkFenced("renew", p.Tenant, p.OperationKey, p.Epoch); err != nil {
		return err
	}
	return checkPositive("renew", "Lease", p.Lease)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *CompleteParams) Validate() error {
	if err := checkFenced("complete", p.Tenant, p.OperationKey, p.Epoch); err != nil {
		return err
	}
	if p.Status != StatusApplied && p.Status != StatusFailed {
		return &InvalidParamsError{Op: "complete", Field: "Status", Reason: fmt.Sprintf("%q is not applied or failed", p.Status)}
	}
	return checkText("complete", "EffectReference", p.EffectReference, false)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *ReleaseParams) Validate() error {
	return checkFenced("release", p.Tenant, p.OperationKey, p.Epoch)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *MarkUnknownParams) Validate() error {
	return checkFenced("mark unknown", p.Tenant, p.OperationKey, p.Epoch)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *ResolveParams) Validate() error {
	const op = "resolve"
	if err := checkTarget(op, p.Tenant, p.OperationKey, "Epoch", p.Epoch, "is not an epoch: give the epoch of the record the decision was made on"); err != nil {
		return err
	}
	switch p.Status {
	case StatusApplied, StatusReleased, StatusFailed:
	default:
		return &InvalidParamsError{Op: op, Field: "Status", Reason: fmt.Sprintf("%q is not applied, released or failed", p.Status)}
	}
	if err := checkSignature(op, p.Signature); err != nil {
		return err
	}
	return checkOptional(op, "EffectReference", p.EffectReference, "ResolvedBy", p.ResolvedBy, "Note", p.Note)
}

// MaxSignatureBytes is the most a decision's signed statement (ResolveParams.Signature,
// DecideApprovalParams.Signature) may hold: room for a statement with a resolution's longest note.
const MaxSignatureBytes = 256 << 10

// checkSignature refuses a signed statement over MaxSignatureBytes.
func checkSignature(op string, sig []byte) error {
	if len(sig) > MaxSignatureBytes {
		return &InvalidParamsError{Op: op, Field: "Signature", Reason: fmt.Sprintf("is %d bytes, more than %d", len(sig), MaxSignatureBytes)}
	}
	return nil
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *GetParams) Validate() error {
	if err := checkText("get", "Tenant", p.Tenant, true); err != nil {
		return err
	}
	return checkText("get", "OperationKey", p.OperationKey, true)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil. The cursor is
// checked by the store that issued it.
func (p *ListParams) Validate() error {
	if p.Status != "" && !p.Status.Valid() {
		return &InvalidParamsError{Op: "list", Field: "Status", Reason: fmt.Sprintf("%q is not a status", p.Status)}
	}
	return validateListFilter("list", p.Tenant, p.Tool, p.WorkflowID, p.Cursor, p.Limit)
}

// validateListFilter checks the filter and page fields List and ListApprovals share.
func validateListFilter(op, tenant, tool, workflowID, cursor string, limit int) error {
	for _, f := range []struct{ name, v string }{
		{"Tenant", tenant}, {"Tool", tool}, {"WorkflowID", workflowID}, {"Cursor", cursor},
	} {
		if err := checkText(op, f.name, f.v, false); err != nil {
			return err
		}
	}
	if limit < 0 || limit > MaxListLimit {
		return &InvalidParamsError{Op: op, Field: "Limit", Reason: fmt.Sprintf("%d is outside 0..%d", limit, MaxListLimit)}
	}
	return nil
}

// PageSize returns p.Limit, or DefaultListLimit when it is zero.
func (p *ListParams) PageSize() int { return pageSize(p.Limit) }

// pageSize returns limit, or DefaultListLimit when it is zero.
func pageSize(limit int) int {
	if limit == 0 {
		return DefaultListLimit
	}
	return limit
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *PurgeParams) Validate() error {
	if p.BatchSize < 0 {
		return &InvalidParamsError{Op: "purge", Field: "BatchSize", Reason: fmt.Sprintf("%d is negative", p.BatchSize)}
	}
	if math.IsNaN(p.Rest) || math.IsInf(p.Rest, 0) {
		return &InvalidParamsError{Op: "purge", Field: "Rest", Reason: "not a finite number"}
	}
	return nil
}

// RestAfter returns how long to pause after a batch that took took: took × Rest (Rest 0 means
// 1; a negative Rest means no pause).
func (p *PurgeParams) RestAfter(took time.Duration) time.Duration {
	switch {
	case p.Rest < 0:
		return 0
	case p.Rest == 0:
		return took
	}
	return time.Duration(float64(took) * p.Rest)
}

// Pause waits RestAfter(took) after a batch that took took, or until ctx is done (then it
// returns ctx.Err()). Stores call it between full batches.
func (p *PurgeParams) Pause(ctx context.Context, took time.Duration) error {
	return sleep(ctx, p.RestAfter(took))
}

// Pacer returns a PurgePacer for one run of Purge with p.
func (p *PurgeParams) Pacer() *PurgePacer { return &PurgePacer{p: p} }

// PurgePacer paces the batches of one Purge run: its pauses add up to PurgeParams.Rest times
// the batches' time, counting what a pause overslept (a busy machine wakes a sleeper late)
// against the next one, never more than that one, so at most two batches run back to back.
// It is not safe for concurrent use.
type PurgePacer struct {
	p    *PurgeParams
	owed time.Duration // pauses due but not yet taken; negative: taken in excess
}

// Pause waits after a batch that took took: RestAfter(took), less what the pause before it
// overslept. It returns ctx.Err() if ctx is done first.
func (pc *PurgePacer) Pause(ctx context.Context, took time.Duration) error {
	due := pc.p.RestAfter(took)
	pc.owed = max(pc.owed, -due) + due
	if pc.owed <= 0 {
		return nil
	}
	start := time.Now()
	err := sleep(ctx, pc.owed)
	pc.owed -= time.Since(start)
	return err
}

// sleep waits d or until ctx is done (then it returns ctx.Err()).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Batch returns p.BatchSize, or DefaultPurgeBatchSize when it is zero.
func (p *PurgeParams) Batch() int {
	if p.BatchSize == 0 {
		return DefaultPurgeBatchSize
	}
	return p.BatchSize
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *ForgetParams) Validate() error {
	return checkText("forget", "Tenant", p.Tenant, true)
}

// ListCursor is where List's keyset pagination resumes: the sort key (updated_at, tenant,
// operation key) of the last record of a page. Stores hand it out as ListResult.Next with
// NextCursor and read ListParams.Cursor with ParseListCursor; to callers it is an opaque string.
type ListCursor struct {
	UpdatedAt    time.Time
	Tenant       string
	OperationKey string
}

type listCursorJSON struct {
	U int64  `json:"u"` // updated_at, Unix microseconds (the stores' resolution)
	T string `json:"t"`
	K string `json:"k"`
}

// encodeCursor returns the opaque cursor of a sort key (a time, a tenant, an operation key).
func encodeCursor(at time.Time, tenant, key string) string {
	b, _ := json.Marshal(listCursorJSON{U: at.UnixMicro(), T: tenant, K: key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor made by encodeCursor; anything else is an *InvalidParamsError of op.
func decodeCursor(op, s string) (time.Time, string, string, error) {
	var c listCursorJSON
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return time.Time{}, "", "", &InvalidParamsError{Op: op, Field: "Cursor", Reason: "not a cursor this store issued"}
	}
	return time.UnixMicro(c.U), c.T, c.K, nil
}

// NextCursor returns the cursor that resumes a listing after r.
func NextCursor(r *Record) string { return encodeCursor(r.UpdatedAt, r.Tenant, r.OperationKey) }

// ParseListCursor reads a cursor made by NextCursor. Anything else is an *InvalidParamsError.
func ParseListCursor(s string) (ListCursor, error) {
	at, tenant, key, err := decodeCursor("list", s)
	return ListCursor{UpdatedAt: at, Tenant: tenant, OperationKey: key}, err
}

// After returns the cursor p.Cursor names (ParseListCursor), or nil when it is "" (the first
// page). A malformed cursor is an *InvalidParamsError.
func (p *ListParams) After() (*ListCursor, error) { return cursorAfter(p.Cursor, ParseListCursor) }

// cursorAfter returns the cursor s names, read by parse, or nil when s is "".
func cursorAfter[C any](s string, parse func(string) (C, error)) (*C, error) {
	if s == "" {
		return nil, nil
	}
	c, err := parse(s)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Before reports whether c sorts before r in List's order (updated_at, tenant, operation key).
func (c ListCursor) Before(r *Record) bool {
	return sortsBefore(c.UpdatedAt, c.Tenant, c.OperationKey, r.UpdatedAt, r.Tenant, r.OperationKey)
}

// sortsBefore reports whether the sort key (at, tenant, key) of a comes before b's, in the order
// List and ListApprovals page by: the time in microseconds (the stores' resolution), then tenant
// and operation key byte-wise.
func sortsBefore(atA time.Time, tenantA, keyA string, atB time.Time, tenantB, keyB string) bool {
	if ua, ub := atA.UnixMicro(), atB.UnixMicro(); ua != ub {
		return ua < ub
	}
	if tenantA != tenantB {
		return tenantA < tenantB
	}
	return keyA < keyB
}
