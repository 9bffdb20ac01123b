package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/stretchr/testify/require"
)

// grants add makes a grant of the namespace (tenant defaulting to it), checks the rule's syntax
// and the duration before touching the store, lists it, shows it in `oncekey show` once it
// approved a call, and revoke ends it once: a second revoke by someone else says who did.
func TestGrantsAddListRevoke(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url, "USER": "ada"}

	r := cli(t, env, "grants", "add", "IssueRefund", "--tenant", "acme", "--rule", "amount_cents <=", "--for", "8h")
	requireOneLine(t, r, exitUsage, "--rule: ", "want a JSON literal", "nothing was granted")
	r = cli(t, env, "grants", "add", "IssueRefund", "--tenant", "acme")
	requireOneLine(t, r, exitUsage, "--for: ", "must be positive")
	r = cli(t, env, "grants", "add", "IssueRefund", "--for", "2400h")
	requireOneLine(t, r, exitUsage, "--for: ", "longer than")

	r = cli(t, env, "grants", "add", "IssueRefund", "--tenant", "acme", "--rule", "amount_cents <= 10000", "--for", "8h", "--reason", "holiday returns")
	require.Equal(t, 0, r.code, r.stderr)
	id := regexp.MustCompile(`g1_[0-9a-f]{32}`).FindString(r.stdout)
	require.NotEmpty(t, id, r.stdout)
	require.Contains(t, r.stdout, "IssueRefund of tenant acme in namespace default, where amount_cents <= 10000")
	require.Contains(t, r.stdout, "oncekey grants revoke "+id)
	r = cli(t, env, "grants", "add", "CreateTicket", "--workflow", "wf-9", "--for", "30m")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "CreateTicket of tenant default in namespace default, workflow wf-9 only")

	r = cli(t, env, "grants", "--json", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	var views []grantView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 1)
	require.Equal(t, id, views[0].ID)
	require.Equal(t, "ada", views[0].CreatedBy)
	require.Equal(t, oncekeystore.GrantActive, views[0].Status)
	require.Equal(t, 8*time.Hour, views[0].ExpiresAt.Sub(views[0].CreatedAt))
	r = cli(t, env, "grants")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, id)
	require.Contains(t, r.stdout, "amount_cents <= 10000")
	require.Contains(t, r.stdout, "(every call)")
	r = cli(t, env, "grants", "--namespace", "other")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no grants match in namespace other")

	// A call the grant approved: show names the grant and who made it.
	key := seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 42.00 EUR on order 7")
	ap, err := s.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	_, err = s.ApproveByGrant(context.Background(), &oncekeystore.ApproveByGrantParams{Tenant: "acme", OperationKey: key, Episode: ap.Episode,
		Token: ap.Token, GrantID: id, WorkflowID: "wf-1", Retention: time.Hour})
	require.NoError(t, err)
	r = cli(t, env, "show", key, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "standing grant "+id)
	require.Regexp(t, `approval grant\s+`+id+` \(made by ada;`, r.stdout)

	r = cli(t, env, "grants", "revoke", id, "--by", "grace")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "revoked "+id)
	require.Contains(t, r.stdout, "by grace")
	r = cli(t, env, "grants", "revoke", id)
	requireOneLine(t, r, exitFailed, "already revoked by grace at ", "nothing was changed")
	r = cli(t, env, "grants", "--status", "revoked", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "revoked by grace")
	r = cli(t, env, "grants", "revoke", oncekeystore.NewGrantID())
	requireOneLine(t, r, exitNotFound, "no grant g1_", "oncekey grants --status all")
	r = cli(t, env, "grants", "--status", "live")
	requireOneLine(t, r, exitUsage, `--status "live" is not one of active, revoked, expired, ended, all`)
}

// A pending approval in the last quarter of its wait is marked (soon) in `oncekey approvals`.
func TestApprovalsMarkNearDeadline(t *testing.T) {
	url, s, pool := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	near := seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 120.00 EUR on order 42")
	far := seedApproval(t, s, "acme", "IssueRefund", "wf-2", "refund", "refund 80.00 EUR on order 43")
	_, err := pool.Exec(context.Background(), `UPDATE oncekey_approvals SET requested_at = now() - interval '50 minutes',
    deadline = now() + interval '10 minutes' WHERE operation_key = $1`, near)
	require.NoError(t, err)
	r := cli(t, env, "approvals")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, near[:20]+`.*in \d+m \(soon\)`, r.stdout)
	require.NotRegexp(t, far[:20]+`.*\(soon\)`, r.stdout)
}
