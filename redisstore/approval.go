package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

var _ oncekeystore.ApprovalStore = (*Store)(nil)

// readApproval reads the reply {code, now, fields...} of the approval script op on key:
// ErrNotFound for code "N", else the approval; errors name op and key.
func readApproval(op, key string, v []any) (*oncekeystore.Approval, error) {
	if len(v) > 0 && str(v[0]) == "N" {
		return nil, fmt.Errorf("redisstore: %s %s: %w", op, key, oncekeystore.ErrNotFound)
	}
	a, err := decodeReplyOf(v, lua.ApprovalFields, decodeApproval)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s %s: %w", op, key, err)
	}
	return a, nil
}

// decodeApproval reads the fields of AF, as the approval reads at now (µs, the server's clock):
// an overdue one timed out (oncekeystore.Approval.ReadAsOf).
func decodeApproval(f []any, now int64) (*oncekeystore.Approval, error) {
	d := fields{f: f, what: "approval"}
	a := &oncekeystore.Approval{
		Tenant: str(f[0]), OperationKey: str(f[1]), Namespace: str(f[2]), Tool: str(f[3]), Fingerprint: str(f[4]),
		WorkflowID: str(f[5]), StepID: str(f[6]), Summary: str(f[7]), Status: oncekeystore.ApprovalStatus(str(f[8])),
		Episode: d.num(9), RequestedAt: d.at(10), Deadline: d.at(11), DecidedAt: d.at(12), DecidedBy: str(f[13]), Reason: str(f[14]),
		ExpiresAt: d.at(15), Token: str(f[16]), ModelMessage: str(f[17]), ChangesRequested: str(f[18]) == "1",
		EditOf: str(f[19]), EditedAs: str(f[20]), GrantID: str(f[21]),
	}
	if sig := str(f[22]); sig != "" {
		a.Signature = []byte(sig)
	}
	cs, err := decodeCosignatures(str(f[23]))
	if err != nil {
		return nil, err
	}
	a.Cosignatures = cs
	a.ReadAsOf(time.UnixMicro(now))
	return a, d.err(8)
}

// RequestApproval implements oncekeystore.ApprovalStore in one script, on the server's clock. The
// request token is p.RequestToken, or a random one without it; a request repeated by the client
// library after a lost reply carries the same token, so it reports the episode it asked
// (Created) as a repeat with p.RequestToken does.
func (s *Store) RequestApproval(ctx context.Context, p *oncekeystore.RequestApprovalParams) (*oncekeystore.ApprovalResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "request approval"
	tok := p.RequestToken
	if tok == 0 {
		tok = token()
	}
	v, err := s.run(ctx, op, p.OperationKey, lua.RequestApproval, s.layout.ApprovalKeys(p.Tenant, p.OperationKey),
		p.Tenant, p.OperationKey, p.Namespace, p.Tool, p.Fingerprint, p.WorkflowID, p.StepID, p.Summary,
		p.Timeout.Microseconds(), tok, p.Token, p.EditOf, p.SupersedeGrant)
	if err != nil {
		return nil, err
	}
	a, err := readApproval(op, p.OperationKey, v)
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ApprovalResult{Created: str(v[0]) == "C", Approval: a}, nil
}

// DecideApproval implements oncekeystore.ApprovalStore in one script, fenced by the episode and the
// pending status. A person's decision on an overdue approval writes the timeout it reads as
// instead and is answered *oncekeystore.ApprovalConflictError with it. A decision repeated by the client library after a lost reply carries the
// same write token, so it reports the decision instead of *oncekeystore.ApprovalConflictError.
func (s *Store) DecideApproval(ctx context.Context, p *oncekeystore.DecideApprovalParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "decide approval"
	keys := s.layout.ApprovalKeys(p.Tenant, p.OperationKey)
	v, err := s.run(ctx, op, p.OperationKey, lua.DecideApproval, []string{keys[0], keys[3]},
		p.Tenant, p.OperationKey, p.Episode, string(p.Status), p.DecidedBy, p.Reason, p.Retention.Microseconds(), token(), p.Token,
		oncekeystore.ApprovalTimeoutDecider, oncekeystore.ApprovalOverdueReason, p.ModelMessage, flag(p.ChangesRequested), p.EditedAs, p.Signature)
	if err != nil {
		return nil, err
	}
	a, err := readApproval(op, p.OperationKey, v)
	if err != nil {
		return nil, err
	}
	if err := refusedDecision(op, p.OperationKey, str(v[0]), p.Episode, a); err != nil {
		return nil, err
	}
	return a, nil
}

// flag is b as the approval scripts store a flag: "1", or "" for false.
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}

// refusedDecision is the error of a decision script's code: S (the approval a is at another
// episode or request than episode) a *oncekeystore.StaleDecisionError, C (it is not pending) an
// *oncekeystore.ApprovalConflictError; nil for any other code.
func refusedDecision(op, key, code string, episode int64, a *oncekeystore.Approval) error {
	switch code {
	case "S":
		return fmt.Errorf("redisstore: %s %s: %w", op, key, &oncekeystore.StaleDecisionError{
			OperationKey: key, Epoch: episode, Current: a.Episode, Status: oncekeystore.Status(a.Status)})
	case "C":
		return fmt.Errorf("redisstore: %s %s: %w", op, key, &oncekeystore.ApprovalConflictError{Approval: a})
	}
	return nil
}

// GetApproval implements oncekeystore.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "get approval"
	v, err := s.run(ctx, op, p.OperationKey, lua.GetApproval, s.layout.ApprovalKeys(p.Tenant, p.OperationKey)[:1])
	if err != nil {
		return nil, err
	}
	return readApproval(op, p.OperationKey, v)
}

// ListApprovals implements oncekeystore.ApprovalStore with keyset pagination in (requested at,
// tenant, operation key) order, merging the buckets' approval indexes (a tenant's, with
// ListApprovalsParams.Tenant) page by page as List does. An approval asked anew while a caller
// pages moves to the end.
func (s *Store) ListApprovals(ctx context.Context, p *oncekeystore.ListApprovalsParams) (*oncekeystore.ListApprovalsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := &listing[*oncekeystore.Approval]{op: "list approvals", items: approvalItems, cursor: p.Cursor,
		tenant: p.Tenant, status: string(p.Status), tool: p.Tool, workflowID: p.WorkflowID,
		index: func(b string) string {
			if p.Tenant != "" {
				return b + ":apt:" + p.Tenant
			}
			return b + ":apall"
		}}
	out, next, err := l.read(ctx, s, p.PageSize())
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ListApprovalsResult{Approvals: out, Next: next}, nil
}

// approvalsAfter reads a ListApprovals cursor as the sort key it resumes after.
func approvalsAfter(cursor string) (sortKey, error) {
	c, err := oncekeystore.ParseApprovalCursor(cursor)
	return sortKey{c.RequestedAt, c.Tenant, c.OperationKey}, err
}

// lessApproval orders approvals as ListApprovals returns them: (RequestedAt, Tenant,
// OperationKey), byte-wise.
func lessApproval(a, b *oncekeystore.Approval) bool {
	return oncekeystore.ApprovalCursor{RequestedAt: a.RequestedAt, Tenant: a.Tenant, OperationKey: a.OperationKey}.Before(b)
}

// approvalItems is how ListApprovals reads approvals.
var approvalItems = items[*oncekeystore.Approval]{script: lua.ListApprovals, prefix: ":ap:", fields: lua.ApprovalFields,
	decode: decodeApproval, less: lessApproval, next: oncekeystore.NextApprovalCursor, after: approvalsAfter}

// purgeApprovals deletes the decided approvals past their retention, at most n per batch (one
// script per bucket that has work, in one pipeline), adding to res and calling progress after
// each batch that deleted any. It rests between full batches with pace, the run's (Purge).
func (s *Store) purgeApprovals(ctx context.Context, p *oncekeystore.PurgeParams, pace *oncekeystore.PurgePacer, res *oncekeystore.PurgeResult) error {
	n := p.Batch()
	left, err := s.due(ctx, ":apexp")
	if err != nil {
		return err
	}
	for {
		which, quotas := plan(left, n)
		calls := make([]call, len(which))
		for j, i := range which {
			b := s.bases[i]
			calls[j] = call{lua.PurgeApprovals, []string{b + ":apexp", b + ":apall"}, []any{b + ":ap:", b + ":apt:", quotas[j]}}
		}
		if len(calls) == 0 {
			return nil
		}
		start := time.Now()
		replies, err := s.runAll(ctx, "purge", calls)
		if err != nil {
			return err
		}
		var done int64
		for j, v := range replies {
			i := which[j]
			if len(v) < 3 {
				return fmt.Errorf("redisstore: purge: reply of %d values", len(v))
			}
			d, _ := v[0].(int64)
			looked, _ := v[1].(int64)
			done += d
			left[i] -= looked
			if str(v[2]) == "1" {
				left[i] = 0
			}
		}
		if done > 0 {
			res.ApprovalsDeleted += done
			res.Batches++
			if p.Progress != nil {
				p.Progress(*res)
			}
		}
		if done == int64(n) {
			if err := pace.Pause(ctx, time.Since(start)); err != nil {
				return wrapErr("purge", "", err)
			}
		}
	}
}

// decodeCosignatures reads the csig field of an approval: each signed statement as its length in
// decimal, ':' and its bytes. "" is none.
func decodeCosignatures(s string) ([][]byte, error) {
	var out [][]byte
	for s != "" {
		i := strings.IndexByte(s, ':')
		n, err := strconv.Atoi(s[:max(i, 0)])
		if i < 0 || err != nil || n < 0 || n > len(s)-i-1 {
			return nil, fmt.Errorf("approval field csig is malformed")
		}
		out = append(out, []byte(s[i+1:i+1+n]))
		s = s[i+1+n:]
	}
	return out, nil
}
