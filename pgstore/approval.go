package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncekey/oncekey/oncekeystore"
)

var _ oncekeystore.ApprovalStore = (*Store)(nil)

// approvalCols is the select list of an approval, in the order scanApproval scans it: an
// overdue one ({overdue}) as it reads, timed out at its deadline (oncekeystore.Approval.ReadAsOf).
const approvalCols = `tenant, operation_key, namespace, tool, fingerprint, workflow_id, step_id, summary,
    CASE WHEN {overdue} THEN 'timed_out' ELSE status END, episode, requested_at, deadline,
    CASE WHEN {overdue} THEN deadline ELSE decided_at END, CASE WHEN {overdue} THEN {decider} ELSE decided_by END,
    CASE WHEN {overdue} THEN {overdueReason} ELSE reason END, expires_at, token,
    model_message, changes_requested, edit_of, edited_as, grant_id, signature, cosigned`

// The conditions on approvals, named once. approvalAnew is whether a request (EXCLUDED) asks
// the existing approval (o) anew, at the next episode: not the repeat of the request that asked
// it (another token), the same fingerprint, namespace and tool, and timed out or decided and
// past retention. approvalExpiredWhere is whether Purge deletes an approval: decided and past
// retention (a pending one never is). A worker's request (a token) also asks anew a pending or
// approved approval of its fingerprint asked without a token or with another summary, or approved
// under the grant it supersedes ($13), and a denied, timed-out or replaced approval of another
// fingerprint. approvalOverdue is whether an approval is
// pending past its deadline: it reads, and is asked anew, as timed out; approvalStatus is the
// status of o as it reads.
const (
	approvalAnew = `(o.request_token <> EXCLUDED.request_token AND o.namespace = EXCLUDED.namespace AND o.tool = EXCLUDED.tool
    AND ((o.fingerprint = EXCLUDED.fingerprint
            AND ({ostatus} = 'timed_out' OR (o.status <> 'pending' AND o.expires_at <= now())
                OR (EXCLUDED.token <> '' AND {ostatus} IN ('pending', 'approved') AND (o.token = '' OR o.summary <> EXCLUDED.summary))
                OR (EXCLUDED.token <> '' AND {ostatus} = 'approved' AND o.grant_id <> '' AND o.grant_id = $13::text)))
        OR (o.fingerprint <> EXCLUDED.fingerprint AND EXCLUDED.token <> '' AND {ostatus} IN ('denied', 'timed_out', 'replaced'))))`
	approvalExpiredWhere = `(status <> 'pending' AND expires_at <= now())`
	approvalOverdue      = `(status = 'pending' AND deadline <= now())`
	approvalStatus       = `(CASE WHEN o.status = 'pending' AND o.deadline <= now() THEN 'timed_out' ELSE o.status END)`
)

// statusAsRead keeps the approvals whose status, as they read, is status (none: all); pending
// and timed out are conditions of their own, which keeps the partial index on pending approvals
// usable.
func (l *listing) statusAsRead(status oncekeystore.ApprovalStatus) {
	switch status {
	case "":
	case oncekeystore.ApprovalPending:
		l.where = append(l.where, "(status = 'pending' AND deadline > now())")
	case oncekeystore.ApprovalTimedOut:
		l.where = append(l.where, "(status = 'timed_out' OR "+approvalOverdue+")")
	default:
		l.where = append(l.where, "status = "+l.arg(string(status)))
	}
}

// approvalMigration names the migration that creates the approvals table, for the error of a
// store whose schema lacks it.
const approvalMigration = "003_approvals"

// cosignMigration names the migration that adds the approvals' cosigned column (partial
// approvals of a request that needs more than one signer).
const cosignMigration = "012_approval_cosignatures"

// approvalReplacer fills in the approval statements' names for the approvals table a; {late}
// is whether a decision ($4) is a person's on an overdue approval.
func approvalReplacer(a string) *strings.Replacer {
	return strings.NewReplacer("{a}", a, "{cols}", fill(approvalCols), "{anew}", fill(approvalAnew),
		"{late}", fill(`(deadline <= now() AND $4 <> 'timed_out')`),
		"{decider}", quoteLiteral(oncekeystore.ApprovalTimeoutDecider), "{overdueReason}", quoteLiteral(oncekeystore.ApprovalOverdueReason))
}

// fill replaces the overdue condition and its literals in q.
func fill(q string) string {
	return strings.NewReplacer("{overdue}", approvalOverdue, "{ostatus}", approvalStatus,
		"{decider}", quoteLiteral(oncekeystore.ApprovalTimeoutDecider), "{overdueReason}", quoteLiteral(oncekeystore.ApprovalOverdueReason)).Replace(q)
}

// quoteLiteral returns s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// approvalSQL builds the approval statements of s for the approvals table a (sanitized,
// possibly schema-qualified).
func (s *Store) approvalSQL(a string) {
	r := approvalReplacer(a)
	// One statement: insert the first episode or, on conflict, rewrite the row with a CASE per
	// column that keeps every value unless the request asks anew (namespace and tool never
	// change: asking anew needs them equal). RETURNING reports the row after the statement and
	// whether this request's token is the stored one (it asked the episode, now or as the
	// request it repeats).
	s.requestApprovalSQL = r.Replace(`INSERT INTO {a} AS o (tenant, operation_key, namespace, tool, fingerprint, workflow_id,
    step_id, summary, status, episode, requested_at, deadline, request_token, token, edit_of)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', 1, now(), now() + $9::bigint * interval '1 microsecond', $10, $11, $12)
ON CONFLICT (tenant, operation_key) DO UPDATE SET
    fingerprint   = CASE WHEN {anew} THEN EXCLUDED.fingerprint ELSE o.fingerprint END,
    workflow_id   = CASE WHEN {anew} THEN EXCLUDED.workflow_id ELSE o.workflow_id END,
    step_id       = CASE WHEN {anew} THEN EXCLUDED.step_id ELSE o.step_id END,
    summary       = CASE WHEN {anew} THEN EXCLUDED.summary ELSE o.summary END,
    status        = CASE WHEN {anew} THEN 'pending' ELSE o.status END,
    episode       = CASE WHEN {anew} THEN o.episode + 1 ELSE o.episode END,
    requested_at  = CASE WHEN {anew} THEN EXCLUDED.requested_at ELSE o.requested_at END,
    deadline      = CASE WHEN {anew} THEN EXCLUDED.deadline ELSE o.deadline END,
    decided_at    = CASE WHEN {anew} THEN NULL ELSE o.decided_at END,
    decided_by    = CASE WHEN {anew} THEN '' ELSE o.decided_by END,
    reason        = CASE WHEN {anew} THEN '' ELSE o.reason END,
    expires_at    = CASE WHEN {anew} THEN NULL ELSE o.expires_at END,
    request_token = CASE WHEN {anew} THEN EXCLUDED.request_token ELSE o.request_token END,
    token         = CASE WHEN {anew} THEN EXCLUDED.token ELSE o.token END,
    model_message = CASE WHEN {anew} THEN '' ELSE o.model_message END,
    changes_requested = CASE WHEN {anew} THEN false ELSE o.changes_requested END,
    edit_of       = CASE WHEN {anew} THEN EXCLUDED.edit_of ELSE o.edit_of END,
    edited_as     = CASE WHEN {anew} THEN '' ELSE o.edited_as END,
    grant_id      = CASE WHEN {anew} THEN '' ELSE o.grant_id END,
    signature     = CASE WHEN {anew} THEN NULL ELSE o.signature END,
    cosigned      = CASE WHEN {anew} THEN '{}' ELSE o.cosigned END
RETURNING {cols}, request_token = $10 AS created`)
	// A person's decision on an overdue approval ({late}) writes the timeout it reads as instead,
	// and RETURNING says so.
	s.decideApprovalSQL = r.Replace(`UPDATE {a} SET status = CASE WHEN {late} THEN 'timed_out' ELSE $4 END,
    decided_at = CASE WHEN {late} THEN deadline ELSE now() END,
    decided_by = CASE WHEN {late} THEN {decider} ELSE $5 END,
    reason = CASE WHEN {late} THEN {overdueReason} ELSE $6 END,
    expires_at = now() + $7::bigint * interval '1 microsecond',
    model_message = CASE WHEN {late} THEN '' ELSE $9 END,
    changes_requested = CASE WHEN {late} THEN false ELSE $10 END,
    edited_as = CASE WHEN {late} THEN '' ELSE $11 END,
    signature = CASE WHEN {late} THEN NULL ELSE $12::bytea END
WHERE tenant = $1 AND operation_key = $2 AND episode = $3 AND token = $8 AND status = 'pending'
RETURNING {cols}, {late} AS late`)
	// A partial approval appends one signer's statement to a pending approval within its
	// deadline; anything else changes nothing, and the second read says why.
	s.cosignApprovalSQL = r.Replace(`UPDATE {a} SET cosigned = array_append(cosigned, $5::bytea)
WHERE tenant = $1 AND operation_key = $2 AND episode = $3 AND token = $4 AND status = 'pending' AND deadline > now()
RETURNING {cols}, false AS late`)
	s.getApprovalSQL = r.Replace(`SELECT {cols} FROM {a} WHERE tenant = $1 AND operation_key = $2`)
	s.purgeApprovalsStep = newPurgeStep(a, approvalExpiredWhere, `DELETE FROM {t}`)
}

// scanApproval scans one row of approvalCols (then extra) into an approval.
func scanApproval(row pgx.Row, extra ...any) (*oncekeystore.Approval, error) {
	var (
		a                    oncekeystore.Approval
		status               string
		decidedAt, expiresAt pgtype.Timestamptz
	)
	dest := append([]any{&a.Tenant, &a.OperationKey, &a.Namespace, &a.Tool, &a.Fingerprint, &a.WorkflowID, &a.StepID,
		&a.Summary, &status, &a.Episode, &a.RequestedAt, &a.Deadline, &decidedAt, &a.DecidedBy, &a.Reason, &expiresAt, &a.Token,
		&a.ModelMessage, &a.ChangesRequested, &a.EditOf, &a.EditedAs, &a.GrantID, &a.Signature, &a.Cosignatures}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if len(a.Cosignatures) == 0 {
		a.Cosignatures = nil
	}
	a.Status = oncekeystore.ApprovalStatus(status)
	if decidedAt.Valid {
		a.DecidedAt = decidedAt.Time
	}
	if expiresAt.Valid {
		a.ExpiresAt = expiresAt.Time
	}
	return &a, nil
}

// wrapApproval is wrap for the statements that use the tables beside the records' table (the
// approvals, the outbox, the grants): with the records' table in place, a missing one means a
// schema migrated before the migration that made it, a table not at the migration this build
// expects, and the error names the earliest migration missing (a schema before 003_approvals
// lacks the grants table too). With the records' table missing, wrap says so, which is the whole
// story. It asks the database once more, on this error path only; if that fails, wrap
// classifies err.
func (s *Store) wrapApproval(ctx context.Context, op, key string, err error) error {
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42703" && strings.Contains(pgErr.Message, "cosigned") {
		return s.outdated(ctx, op, key, "the column cosigned is missing (migration "+cosignMigration+" is not applied)", err)
	}
	if signatureMissing(err) {
		return s.wrapSignature(ctx, op, key, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		return s.wrap(ctx, op, key, err)
	}
	beside := []struct{ name, table, migration string }{
		{"oncekey_approvals", s.approvalTable, approvalMigration},
		{"oncekey_outbox", s.outboxTable, outboxMigration},
		{"oncekey_grants", s.grantTable(), grantMigration},
	}
	mentioned := false
	for _, b := range beside {
		mentioned = mentioned || strings.Contains(pgErr.Message, b.name+`"`)
	}
	if !mentioned {
		return s.wrap(ctx, op, key, err)
	}
	var records bool
	present := make([]bool, len(beside))
	if ctx.Err() != nil || s.call(ctx, func(ctx context.Context) error {
		return s.db().QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL, to_regclass($3) IS NOT NULL, to_regclass($4) IS NOT NULL`,
			s.table, beside[0].table, beside[1].table, beside[2].table).Scan(&records, &present[0], &present[1], &present[2])
	}) != nil || !records {
		return s.wrap(ctx, op, key, err)
	}
	for i, b := range beside {
		if !present[i] {
			return s.outdated(ctx, op, key, "there is no table "+b.name+" beside it (migration "+b.migration+" is not applied)", err)
		}
	}
	return s.wrap(ctx, op, key, err)
}

// outdated is the error for a table not at the migration this build expects, detail saying how.
func (s *Store) outdated(ctx context.Context, op, key, detail string, err error) error {
	return named(op, key, s.schemaError(ctx, op, tableOutdated, detail, err))
}

// RequestApproval implements oncekeystore.ApprovalStore in one statement, on the database clock.
// Without p.RequestToken it writes a random token, which no other request repeats.
func (s *Store) RequestApproval(ctx context.Context, p *oncekeystore.RequestApprovalParams) (*oncekeystore.ApprovalResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	token := tokenOr(p.RequestToken)
	var (
		res oncekeystore.ApprovalResult
		err error
	)
	res.Approval, err = callFor(ctx, s, func(ctx context.Context) (*oncekeystore.Approval, error) {
		return scanApproval(s.db().QueryRow(ctx, s.requestApprovalSQL, p.Tenant, p.OperationKey, p.Namespace,
			p.Tool, p.Fingerprint, p.WorkflowID, p.StepID, p.Summary, micros(p.Timeout), token, p.Token, p.EditOf, p.SupersedeGrant), &res.Created)
	})
	if err != nil {
		return nil, s.wrapApproval(ctx, "request approval", p.OperationKey, err)
	}
	return &res, nil
}

// DecideApproval implements oncekeystore.ApprovalStore: one UPDATE conditional on the episode, the
// request's token and status pending. When it changes nothing, a second read says why: ErrNotFound,
// *oncekeystore.StaleDecisionError (the approval is at another episode or request) or
// *oncekeystore.ApprovalConflictError (it is decided). A person's decision on an overdue approval
// writes the timeout instead and is answered *oncekeystore.ApprovalConflictError with it.
func (s *Store) DecideApproval(ctx context.Context, p *oncekeystore.DecideApprovalParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "decide approval"
	var late bool
	a, err := queryOne(ctx, s, op, p.OperationKey, s.wrapApproval, func(ctx context.Context) (*oncekeystore.Approval, error) {
		if p.Status == oncekeystore.ApprovalPending {
			return scanApproval(s.db().QueryRow(ctx, s.cosignApprovalSQL, p.Tenant, p.OperationKey, p.Episode, p.Token, p.Signature), &late)
		}
		return scanApproval(s.db().QueryRow(ctx, s.decideApprovalSQL, p.Tenant, p.OperationKey, p.Episode,
			string(p.Status), p.DecidedBy, p.Reason, micros(p.Retention), p.Token, p.ModelMessage, p.ChangesRequested, p.EditedAs, p.Signature), &late)
	}, func() error {
		cur, gerr := s.getApproval(ctx, op, p.Tenant, p.OperationKey)
		switch {
		case gerr != nil:
			return gerr
		case cur.Episode != p.Episode, cur.Token != p.Token:
			return fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, &oncekeystore.StaleDecisionError{
				OperationKey: p.OperationKey, Epoch: p.Episode, Current: cur.Episode, Status: oncekeystore.Status(cur.Status)})
		}
		return fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: cur})
	})
	if err != nil {
		return nil, err
	}
	if late {
		return nil, fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: a})
	}
	return a, nil
}

// GetApproval implements oncekeystore.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.getApproval(ctx, "get approval", p.Tenant, p.OperationKey)
}

// getApproval reads an approval; pgx.ErrNoRows becomes oncekeystore.ErrNotFound here and only here.
// Errors are wrapped and name op.
func (s *Store) getApproval(ctx context.Context, op, tenant, key string) (*oncekeystore.Approval, error) {
	return queryOne(ctx, s, op, key, s.wrapApproval, func(ctx context.Context) (*oncekeystore.Approval, error) {
		return scanApproval(s.db().QueryRow(ctx, s.getApprovalSQL, tenant, key))
	}, func() error { return fmt.Errorf("pgstore: %s %s: %w", op, key, oncekeystore.ErrNotFound) })
}

// ListApprovals implements oncekeystore.ApprovalStore with keyset pagination in (requested_at,
// tenant, operation_key) order, one statement per page. An approval asked anew while a caller
// pages moves to the end (it may appear again there) without making another be skipped or
// repeated.
func (s *Store) ListApprovals(ctx context.Context, p *oncekeystore.ListApprovalsParams) (*oncekeystore.ListApprovalsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := listing{sortCol: "requested_at"}
	l.statusAsRead(p.Status)
	l.filter("", p.Tenant, p.Tool, p.WorkflowID)
	as, next, err := readPage(ctx, s, &l, p.PageSize(), page[*oncekeystore.Approval, oncekeystore.ApprovalCursor]{
		op: "list approvals", cols: fill(approvalCols), table: s.approvalTable, wrap: s.wrapApproval, next: oncekeystore.NextApprovalCursor,
		after: p.After, key: func(c oncekeystore.ApprovalCursor) (time.Time, string, string) {
			return c.RequestedAt, c.Tenant, c.OperationKey
		},
		rows: func(rows pgx.Rows) ([]*oncekeystore.Approval, error) {
			return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*oncekeystore.Approval, error) { return scanApproval(row) })
		}})
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ListApprovalsResult{Approvals: as, Next: next}, nil
}
