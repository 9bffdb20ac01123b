package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncekey/oncekey/oncekeystore"
)

var _ oncekeystore.GrantStore = (*Store)(nil)

// grantCols is the select list of a grant, in the order scanGrant scans it, with its status as
// it reads now.
const grantCols = `id, namespace, tenant, tool, workflow_id, rule, created_by, reason, created_at, expires_at, revoked_at, revoked_by,
    CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'active' END, signature, revocation_signature`

// grantTable returns the grants table (oncekey_grants, in Options.Schema if set).
func (s *Store) grantTable() string {
	if s.schema != "" {
		return pgx.Identifier{s.schema, "oncekey_grants"}.Sanitize()
	}
	return "oncekey_grants"
}

// grantSQL returns q with {g} the grants table, {a} the approvals table and {cols} grantCols.
func (s *Store) grantSQL(q string) string {
	return strings.NewReplacer("{g}", s.grantTable(), "{a}", s.approvalTable, "{cols}", grantCols).Replace(q)
}

func scanGrant(row pgx.Row) (*oncekeystore.Grant, error) {
	var (
		g       oncekeystore.Grant
		revoked pgtype.Timestamptz
		status  string
	)
	if err := row.Scan(&g.ID, &g.Namespace, &g.Tenant, &g.Tool, &g.WorkflowID, &g.Rule, &g.CreatedBy, &g.Reason,
		&g.CreatedAt, &g.ExpiresAt, &revoked, &g.RevokedBy, &status, &g.Signature, &g.RevocationSignature); err != nil {
		return nil, err
	}
	if revoked.Valid {
		g.RevokedAt = revoked.Time
	}
	g.Status = oncekeystore.GrantStatus(status)
	return &g, nil
}

// grantMigration names the migration that creates the grants table.
const grantMigration = "008_grants"

// grantScopeMigration names the migration that adds the grants' purge_at column.
const grantScopeMigration = "009_grant_scope"

// revocationSignatureMigration names the migration that adds the grants' revocation_signature
// column.
const revocationSignatureMigration = "011_grant_revocation_signatures"

// The conditions of ListGrantsParams.Status on the grants table, as of now().
var grantStatusWhere = map[oncekeystore.GrantStatus]string{
	oncekeystore.GrantActive:  `revoked_at IS NULL AND expires_at > now()`,
	oncekeystore.GrantRevoked: `revoked_at IS NOT NULL`,
	oncekeystore.GrantExpired: `revoked_at IS NULL AND expires_at <= now()`,
	oncekeystore.GrantEnded:   `(revoked_at IS NOT NULL OR expires_at <= now())`,
}

// grantPurgeWhere is Purge's condition on a grant: ended longer than its retention ago.
const grantPurgeWhere = `(purge_at <= now())`

// wrapGrant is wrap for the grant statements: a missing table beside the records' table is
// told by wrapApproval (the earliest migration missing); a missing column of 008_grants or
// 009_grant_scope means a schema migrated before it.
func (s *Store) wrapGrant(ctx context.Context, op, key string, err error) error {
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42703" {
		for col, migration := range map[string]string{"grant_id": grantMigration, "purge_at": grantScopeMigration,
			"revocation_signature": revocationSignatureMigration} {
			if strings.Contains(pgErr.Message, col) {
				return s.outdated(ctx, op, key, "the column "+col+" is missing (migration "+migration+" is not applied)", err)
			}
		}
	}
	return s.wrapApproval(ctx, op, key, err)
}

// CreateGrant implements oncekeystore.GrantStore, on the database clock.
func (s *Store) CreateGrant(ctx context.Context, p *oncekeystore.CreateGrantParams) (*oncekeystore.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := s.grantSQL(`INSERT INTO {g} (id, namespace, tenant, tool, workflow_id, rule, created_by, reason, created_at, expires_at, purge_at, signature)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), now() + $9::bigint * interval '1 microsecond',
    now() + ($9::bigint + $10::bigint) * interval '1 microsecond', $11::bytea)
RETURNING {cols}`)
	g, err := callFor(ctx, s, func(ctx context.Context) (*oncekeystore.Grant, error) {
		return scanGrant(s.db().QueryRow(ctx, q, oncekeystore.NewGrantID(), p.Namespace, p.Tenant, p.Tool, p.WorkflowID, p.Rule,
			p.CreatedBy, p.Reason, micros(p.Duration), micros(p.KeepFor()), p.Signature))
	})
	if err != nil {
		return nil, s.wrapGrant(ctx, "create grant", "", err)
	}
	return g, nil
}

// RevokeGrant implements oncekeystore.GrantStore: one UPDATE of an active grant; a grant it does not
// change is read and returned as it is; the revoke moves purge_at to the revoke's time plus the
// grant's retention. The UPDATE takes the grant's row lock, which
// ApproveByGrant holds (FOR SHARE) while it decides: a revoke commits before or after it.
func (s *Store) RevokeGrant(ctx context.Context, p *oncekeystore.RevokeGrantParams) (*oncekeystore.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "revoke grant"
	// The row is locked first (the CTE) and revoked_at is clock_timestamp(), not now(): a revoke
	// that waited for ApproveByGrant's lock is recorded at the time it landed, after the approval
	// that held the lock. A plain UPDATE would compute its new row, and so the time, before it
	// waits for the lock.
	q := s.grantSQL(`WITH locked AS (SELECT id AS locked_id FROM {g} WHERE id = $1 FOR UPDATE)
UPDATE {g} SET revoked_at = clock_timestamp(), revoked_by = $2, revocation_signature = $3::bytea, purge_at = clock_timestamp() + (purge_at - expires_at)
FROM locked WHERE id = locked.locked_id AND revoked_at IS NULL AND expires_at > now()
RETURNING {cols}`)
	g, err := callFor(ctx, s, func(ctx context.Context) (*oncekeystore.Grant, error) {
		return scanGrant(s.db().QueryRow(ctx, q, p.ID, p.RevokedBy, p.Signature))
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Revoked or expired already, or no such grant: as it is.
		return s.GetGrant(ctx, p.ID)
	case err != nil:
		return nil, s.wrapGrant(ctx, op, p.ID, err)
	}
	return g, nil
}

// GetGrant implements oncekeystore.GrantStore.
func (s *Store) GetGrant(ctx context.Context, id string) (*oncekeystore.Grant, error) {
	const op = "get grant"
	q := s.grantSQL(`SELECT {cols} FROM {g} WHERE id = $1`)
	return queryOne(ctx, s, op, id, s.wrapGrant, func(ctx context.Context) (*oncekeystore.Grant, error) {
		return scanGrant(s.db().QueryRow(ctx, q, id))
	}, func() error { return fmt.Errorf("pgstore: %s %s: %w", op, id, oncekeystore.ErrNotFound) })
}

// ListGrants implements oncekeystore.GrantStore in one statement, whose conditions are only the
// filters p sets, so that the planner picks the index for them: the worker's lookup of one
// scope's active grants reads oncekey_grants_active_idx over the unexpired grants of the scope.
func (s *Store) ListGrants(ctx context.Context, p *oncekeystore.ListGrantsParams) (*oncekeystore.ListGrantsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q, args, err := s.listGrantsSQL(p)
	if err != nil {
		return nil, err
	}
	gs, err := callFor(ctx, s, func(ctx context.Context) ([]*oncekeystore.Grant, error) {
		rows, err := s.db().Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*oncekeystore.Grant, error) { return scanGrant(row) })
	})
	if err != nil {
		return nil, s.wrapGrant(ctx, "list grants", "", err)
	}
	res := &oncekeystore.ListGrantsResult{Grants: gs}
	if len(gs) > p.PageSize() {
		res.Grants = gs[:p.PageSize()]
		res.Next = oncekeystore.NextGrantCursor(res.Grants[len(res.Grants)-1])
	}
	return res, nil
}

// listGrantsSQL returns ListGrants' statement for p (valid) and its arguments: one page and one
// grant more, which says whether there is a next page.
func (s *Store) listGrantsSQL(p *oncekeystore.ListGrantsParams) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	for _, f := range []struct{ col, v string }{{"namespace", p.Namespace}, {"tenant", p.Tenant}, {"tool", p.Tool}} {
		if f.v != "" {
			where = append(where, f.col+" = "+arg(f.v))
		}
	}
	if p.Status != "" {
		where = append(where, grantStatusWhere[p.Status])
	}
	after, err := p.After()
	if err != nil {
		return "", nil, err
	}
	if after != nil {
		where = append(where, "(created_at, id) > ("+arg(after.CreatedAt)+"::timestamptz, "+arg(after.ID)+")")
	}
	q := `SELECT {cols} FROM {g}`
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	q += "\nORDER BY created_at, id LIMIT " + arg(p.PageSize()+1)
	return s.grantSQL(q), args, nil
}

// ApproveByGrant implements oncekeystore.GrantStore in one transaction: it reads the grant FOR SHARE
// (a revoke waits for it, or it for the revoke), checks it covers the approval, and decides the
// pending request as DecideApproval would, naming the grant.
func (s *Store) ApproveByGrant(ctx context.Context, p *oncekeystore.ApproveByGrantParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "approve by grant"
	lockGrant := s.grantSQL(`SELECT {cols} FROM {g} WHERE id = $1 FOR SHARE`)
	decide := strings.NewReplacer("{a}", s.approvalTable, "{cols}", fill(approvalCols)).Replace(`UPDATE {a} SET status = 'approved',
    decided_at = now(), decided_by = $4, reason = $5, grant_id = $6, expires_at = now() + $7::bigint * interval '1 microsecond'
WHERE tenant = $1 AND operation_key = $2 AND episode = $3 AND token = $8 AND status = 'pending' AND deadline > now()
RETURNING {cols}`)
	var refused error
	a, err := callFor(ctx, s, func(ctx context.Context) (*oncekeystore.Approval, error) {
		refused = nil
		var out *oncekeystore.Approval
		err := pgx.BeginFunc(ctx, s.pool, func(ptx pgx.Tx) error {
			tx := s.on(ptx)
			cur, err := scanApproval(tx.QueryRow(ctx, s.getApprovalSQL, p.Tenant, p.OperationKey))
			if errors.Is(err, pgx.ErrNoRows) {
				refused = fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, oncekeystore.ErrNotFound)
				return nil
			}
			if err != nil {
				return err
			}
			g, err := scanGrant(tx.QueryRow(ctx, lockGrant, p.GrantID))
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if e := oncekeystore.NotActive(p.GrantID, g, cur.Namespace, cur.Tenant, cur.Tool, p.WorkflowID); e != nil {
				refused = fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, e)
				return nil
			}
			out, err = scanApproval(tx.QueryRow(ctx, decide, p.Tenant, p.OperationKey, p.Episode, g.CreatedBy,
				oncekeystore.GrantReason(g.ID), g.ID, micros(p.Retention), p.Token))
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			switch {
			case cur.Episode != p.Episode, cur.Token != p.Token:
				refused = fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, &oncekeystore.StaleDecisionError{
					OperationKey: p.OperationKey, Epoch: p.Episode, Current: cur.Episode, Status: oncekeystore.Status(cur.Status)})
			default:
				refused = fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: cur})
			}
			return nil
		})
		return out, err
	})
	if err != nil {
		return nil, s.wrapGrant(ctx, op, p.OperationKey, err)
	}
	if refused != nil {
		return nil, refused
	}
	return a, nil
}
