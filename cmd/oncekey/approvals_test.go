package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/recordtest"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// seedApproval asks for approval of the operation (tenant, wf, step) of tool through the store's
// own protocol, as the approval workflow does, and returns its key.
func seedApproval(t *testing.T, s oncekeystore.ApprovalStore, tenant, tool, wf, step, summary string) string {
	t.Helper()
	return recordtest.Ask(t, s, tenant, wf, step, tool, summary)
}

// decideApproval records a decision on the pending episode 1 of key, as the approval workflow
// does.
func decideApproval(t *testing.T, s oncekeystore.ApprovalStore, tenant, key string, st oncekeystore.ApprovalStatus, by, reason string) *oncekeystore.Approval {
	t.Helper()
	ap, err := s.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: tenant, OperationKey: key, Episode: 1,
		Status: st, DecidedBy: by, Reason: reason, Retention: time.Hour})
	require.NoError(t, err)
	return ap
}

func approvalsJSON(t *testing.T, env map[string]string, args ...string) []approvalView {
	t.Helper()
	r := cli(t, env, append([]string{"approvals", "--json"}, args...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var views []approvalView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	return views
}

// approvals lists what waits, oldest first, filtered; show prints a key's approval, with or
// without a record; a decision without --episode reads the store first and stops there when
// there is nothing to decide.
func TestApprovalsListShowAndDecided(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	refund := seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 120.00 EUR on order 42")
	mail := seedApproval(t, s, "acme", "SendNewsletter", "wf-2", "send", "newsletter to 12000 customers")
	other := seedApproval(t, s, "globex", "IssueRefund", "wf-3", "refund", "refund 300.00 EUR on order 7")
	denied := seedApproval(t, s, "acme", "IssueRefund", "wf-4", "refund", "refund 999.00 EUR on order 9")
	decideApproval(t, s, "acme", denied, oncekeystore.ApprovalDenied, "ines", "over the limit")

	r := cli(t, env, "approvals")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 5, "a header, three pending approvals, the hint:\n%s", r.stdout)
	require.Regexp(t, `^OPERATION KEY\s+EPISODE\s+TENANT\s+TOOL\s+WORKFLOW\s+AGE\s+TIMES OUT\s+SUMMARY$`, lines[0])
	require.Regexp(t, `^`+refund+`\s+1\s+acme\s+IssueRefund\s+wf-1\s+\d+s ago\s+in (59m|60m|1h)\s+refund 120.00 EUR on order 42$`, lines[1], "oldest first")
	require.Contains(t, lines[2], mail)
	require.Contains(t, lines[3], other)
	require.NotContains(t, r.stdout, denied, "pending only by default")
	require.Equal(t, "decide the oldest with `oncekey approve "+refund+" --tenant acme --episode 1` or `oncekey deny "+refund+
		" --tenant acme --episode 1 --reason WHY`; `oncekey show "+refund+" --tenant acme` shows it", lines[4])

	views := approvalsJSON(t, env, "--tenant", "acme", "--tool", "IssueRefund")
	require.Len(t, views, 1)
	require.Equal(t, refund, views[0].OperationKey)
	require.Equal(t, oncekeystore.ApprovalPending, views[0].Status)
	require.Equal(t, "refund 120.00 EUR on order 42", views[0].Summary)
	require.Nil(t, views[0].DecidedAt)

	views = approvalsJSON(t, env, "--status", "all", "--tenant", "acme")
	require.Len(t, views, 3)
	views = approvalsJSON(t, env, "--status", "denied")
	require.Len(t, views, 1)
	require.Equal(t, "ines", views[0].DecidedBy)
	require.Equal(t, "over the limit", views[0].Reason)
	require.NotNil(t, views[0].DecidedAt)
	require.NotNil(t, views[0].ExpiresAt)

	r = cli(t, env, "approvals", "--status", "denied")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^`+denied+`\s+1\s+acme\s+IssueRefund\s+wf-4\s+denied\s+\S+ ago\s+ines\s+refund 999.00 EUR on order 9$`, r.stdout)
	r = cli(t, env, "approvals", "--status", "approved")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no approvals match\n", r.stdout)
	r = cli(t, env, "approvals", "--tenant", "initech")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no approvals wait")
	r = cli(t, env, "approvals", "--tool", "issuerefund")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no approvals wait (--status all lists decided ones too); tool names match exactly, in case too: did you mean --tool IssueRefund?\n", r.stdout)
	r = cli(t, env, "approvals", "--status", "done")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "pending, approved, denied, timed_out, all")

	// show: an approval whose call has no record yet.
	r = cli(t, env, "show", refund, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^record\s+none yet: the call waits for this approval and has not run$`, r.stdout)
	require.Regexp(t, `(?m)^approval\s+pending, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval summary\s+refund 120.00 EUR on order 42$`, r.stdout)
	require.Regexp(t, `(?m)^approval deadline\s+\S+ \(in `, r.stdout)
	require.NotContains(t, r.stdout, "approval decided")

	r = cli(t, env, "show", denied, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^record\s+none: the call was refused and never ran$`, r.stdout)
	require.Regexp(t, `(?m)^approval\s+denied, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval decided\s+\S+ by ines$`, r.stdout)
	require.Regexp(t, `(?m)^approval reason\s+over the limit$`, r.stdout)

	r = cli(t, env, "show", denied, "--tenant", "acme", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var sv struct {
		OperationKey string        `json:"operation_key"`
		Approval     *approvalView `json:"approval"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sv))
	require.Empty(t, sv.OperationKey, "no record fields without a record")
	require.NotNil(t, sv.Approval)
	require.Equal(t, oncekeystore.ApprovalDenied, sv.Approval.Status)

	// Under another tenant there is neither.
	r = cli(t, env, "show", refund, "--tenant", "globex")
	require.Equal(t, exitNotFound, r.code, r.stdout)

	// A record and its approval: show prints both.
	both := seed(t, s, "acme", "IssueRefund", "wf-5", "refund", oncekeystore.StatusApplied, nil)
	_, err := s.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: "acme", OperationKey: both, Namespace: "default",
		Tool: "IssueRefund", Fingerprint: strings.Repeat("ab", 32), WorkflowID: "wf-5", StepID: "refund", Summary: "refund 1.00 EUR", Timeout: time.Hour})
	require.NoError(t, err)
	decideApproval(t, s, "acme", both, oncekeystore.ApprovalApproved, "ada", "")
	r = cli(t, env, "show", both, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^status\s+applied$`, r.stdout)
	require.Regexp(t, `(?m)^approval\s+approved, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval decided\s+\S+ by ada$`, r.stdout)
	require.Regexp(t, `(?m)^approval kept until\s+`, r.stdout)
	v := showJSON(t, env, both, "acme")
	require.Equal(t, oncekeystore.StatusApplied, v.Status, "show --json keeps the record's fields where they were")

	// approve/deny without --episode read the store first: nothing to decide stops there, before
	// Temporal is dialled (there is none at this address).
	env["TEMPORAL_ADDRESS"] = "127.0.0.1:1"
	r = cli(t, env, "approve", denied, "--tenant", "acme")
	requireOneLine(t, r, exitFailed, "the approval of "+denied+" (episode 1) is already denied by ines at ", ": there is nothing to decide; nothing was sent",
		"`oncekey show "+denied+" --tenant acme` shows it")
	// Another tenant's approval is refused (exit 1, as the workflow refuses it with --episode),
	// naming the tenant, with the command.
	r = cli(t, env, "deny", refund, "--tenant", "globex", "--reason", "no")
	requireOneLine(t, r, exitFailed, "the approval of "+refund+" belongs to tenant acme, not globex: a decision names the operation's tenant, so nothing was recorded")
	cmd := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(r.stderr)
	require.NotNil(t, cmd)
	require.Equal(t, []string{"oncekey", "deny", refund, "--tenant", "acme", "--episode", "1", "--address", "127.0.0.1:1", "--reason", "no"}, shelltest.Args(t, cmd[1]))
	r = cli(t, env, "approve", refund)
	requireOneLine(t, r, exitFailed, "belongs to tenant acme, not default (the tenant defaults to the namespace)")
	r = cli(t, env, "approve", oncekey.KeyPrefix+strings.Repeat("ab", 32), "--tenant", "acme")
	requireOneLine(t, r, exitNotFound, "under tenant acme in Postgres database", "`oncekey approvals` lists what waits")
	r = cli(t, env, "approve", refund, "--tenant", "acme", "--timeout", "3s")
	requireOneLine(t, r, exitUnreachable, "cannot reach Temporal at 127.0.0.1:1")
}

// Stored strings in approvals (from workflows, and so from models' tool calls) print escaped in
// approvals and show, and the commands approvals suggests read back as the values themselves.
func TestApprovalsEscapeStoredStrings(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	const (
		tenant  = "acme\x1b]0;pwned\a"
		tool    = "Evil\x1b[31mTool"
		wf      = "wf\r\nok1_forged  1  acme  Book"
		summary = "refund 1 EUR\r\napproved by: root\u202e"
		by      = "\x1b[2Jops"
		reason  = "fine\tby me\r\n"
	)
	key := seedApproval(t, s, tenant, tool, wf, "step", summary)
	requireSafe := func(t *testing.T, out string) {
		t.Helper()
		for _, bad := range []string{"\x1b", "\r", "\a", "\t", "\u202e"} {
			require.NotContains(t, out, bad, "raw %q in output:\n%s", bad, out)
		}
	}
	r := cli(t, env, "approvals")
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), "a header, one approval, the hint:\n%s", r.stdout)
	for _, e := range []string{`"acme\x1b]0;pwned\a"`, `"Evil\x1b[31mTool"`, `"wf\r\nok1_forged  1  acme  Book"`, `"refund 1 EUR\r\napproved by: root\u202e"`} {
		require.Contains(t, r.stdout, e)
	}
	hint := regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(strings.Split(r.stdout, "\n")[2], -1)
	require.Len(t, hint, 3)
	require.Equal(t, []string{"oncekey", "approve", key, "--tenant", tenant, "--episode", "1"}, shelltest.Args(t, hint[0][1]))
	require.Equal(t, []string{"oncekey", "deny", key, "--tenant", tenant, "--episode", "1", "--reason", "WHY"}, shelltest.Args(t, hint[1][1]))

	decideApproval(t, s, tenant, key, oncekeystore.ApprovalDenied, by, reason)
	r = cli(t, env, "approvals", "--status", "all")
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	require.Contains(t, r.stdout, `"\x1b[2Jops"`)

	r = cli(t, env, "show", key, "--tenant", tenant)
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		require.Regexp(t, `^(operation key|tenant|namespace|tool|workflow|step|record|approval|approval summary|approval requested|approval deadline|approval decided|approval reason|approval kept until) `, line, "every line is a field of its own")
	}
	require.Contains(t, r.stdout, `"fine\tby me\r\n"`)

	// approve's refusal names who decided, escaped.
	r = cli(t, env, "approve", key, "--tenant", tenant)
	require.Equal(t, exitFailed, r.code)
	requireSafe(t, r.stderr)
	require.Contains(t, r.stderr, `already denied by "\x1b[2Jops"`)

	views := approvalsJSON(t, env, "--status", "all")
	require.Len(t, views, 1)
	require.Equal(t, []string{tenant, tool, wf, summary, by, reason}, []string{views[0].Tenant, views[0].Tool, views[0].WorkflowID, views[0].Summary, views[0].DecidedBy, views[0].Reason})
}

// Every command approve, deny and approvals suggest carries hostile values as one inert word.
func TestDecideCommandsQuoteHostileValues(t *testing.T) {
	key := oncekey.KeyPrefix + strings.Repeat("ab", 32)
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue
		}
		a := &app{schema: "s-" + v, namespace: "ns-" + v, getenv: func(string) string { return "" }}
		require.Equal(t, []string{"oncekey", "approve", key, "--tenant", "t-" + v, "--episode", "2", "--namespace", "ns-" + v, "--schema", "s-" + v},
			shelltest.Args(t, a.decideCommand(reconcile.Approve, key, "t-"+v, 2)))
		require.Equal(t, []string{"oncekey", "deny", key, "--tenant", "t-" + v, "--namespace", "ns-" + v, "--reason", "WHY", "--schema", "s-" + v},
			shelltest.Args(t, a.decideCommand(reconcile.Deny, key, "t-"+v, 0)))
		require.Equal(t, []string{"oncekey", "approvals", "--tenant", "t-" + v, "--schema", "s-" + v}, shelltest.Args(t, a.approvalsCommand("t-"+v)))
	}
	// A non-default Temporal address (flag or TEMPORAL_ADDRESS) is carried, so the command reaches
	// the same server; the default is left out.
	a := &app{address: "10.0.0.5:7299", getenv: func(string) string { return "" }}
	require.Equal(t, []string{"oncekey", "approve", key, "--tenant", "acme", "--episode", "1", "--address", "10.0.0.5:7299"},
		shelltest.Args(t, a.decideCommand(reconcile.Approve, key, "acme", 1)))
	a = &app{getenv: func(k string) string { return map[string]string{"TEMPORAL_ADDRESS": "temporal:7233"}[k] }}
	require.Equal(t, []string{"oncekey", "deny", key, "--tenant", "acme", "--address", "temporal:7233", "--reason", "WHY"},
		shelltest.Args(t, a.decideCommand(reconcile.Deny, key, "acme", 0)))
	a = &app{address: defaultAddress, getenv: func(string) string { return "" }}
	require.NotContains(t, a.decideCommand(reconcile.Approve, key, "acme", 1), "--address")
}

// A command that takes an operation key, given none, says what to give and where the keys are.
func TestMissingKeySaysWhatToGive(t *testing.T) {
	for args, want := range map[string]string{
		"approve --tenant acme": "give the operation key: `oncekey approve KEY --tenant T` (keys: `oncekey approvals`)",
		"deny --reason no":      "give the operation key: `oncekey deny KEY --tenant T --reason WHY` (keys: `oncekey approvals`)",
		"show --schema s1":      "give the operation key: `oncekey show KEY --tenant T` (keys: `oncekey list --schema s1`)",
		"resolve --epoch 1":     "give the operation key: `oncekey resolve KEY --tenant T --epoch N --applied|--not-applied|--failed` (keys: `oncekey list --status unknown`)",
		"approve a b":           "give one operation key, not 2 arguments: `oncekey approve KEY --tenant T`",
	} {
		r := cli(t, nil, strings.Fields(args)...)
		requireOneLine(t, r, exitUsage, want)
	}
}

// purge deletes decided approvals past their retention and says so; forget counts and deletes a
// tenant's approvals, also for a tenant that has nothing else.
func TestPurgeAndForgetApprovals(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	ctx := context.Background()
	short := seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 1 EUR")
	_, err := s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: short, Episode: 1,
		Status: oncekeystore.ApprovalDenied, DecidedBy: "ines", Reason: "no", Retention: 50 * time.Millisecond})
	require.NoError(t, err)
	pending := seedApproval(t, s, "acme", "IssueRefund", "wf-2", "refund", "refund 2 EUR")

	require.Eventually(t, func() bool {
		r := cli(t, env, "purge", "--dry-run")
		return r.code == 0 && strings.Contains(r.stdout, "; would delete 1 decided approval(s) past their retention")
	}, 10*time.Second, 50*time.Millisecond)
	r := cli(t, env, "purge")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "; deleted 1 decided approval(s) past their retention")
	views := approvalsJSON(t, env, "--status", "all")
	require.Len(t, views, 1, "the pending approval is never purged")
	require.Equal(t, pending, views[0].OperationKey)

	// A tenant with an approval and no record.
	seedApproval(t, s, "initech", "DeleteAccount", "wf-3", "delete", "delete it")
	r = cli(t, env, "forget", "--tenant", "initech")
	requireOneLine(t, r, exitUsage, "refusing without --yes: this deletes all 0 record(s) and 1 approval(s) of tenant \"initech\"")
	r = cli(t, env, "forget", "--tenant", "initech", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "deleted 0 record(s) and 1 approval(s) of tenant \"initech\"")
	r = cli(t, env, "forget", "--tenant", "initech", "--yes")
	require.Equal(t, exitNotFound, r.code, "nothing left: %s", r.stdout)
	require.Len(t, approvalsJSON(t, env, "--status", "all"), 1, "forget touches one tenant only")
}

// A timed-out approval: show says nobody decided in time and the next call asks again; approve
// says there is nothing to decide and which episode the next request will be.
func TestTimedOutApproval(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": "127.0.0.1:1"}
	key := seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 120.00 EUR")
	decideApproval(t, s, "acme", key, oncekeystore.ApprovalTimedOut, "oncekey (approval timeout)", "")

	r := cli(t, env, "show", key, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^record\s+none: nobody decided in time, so the call was refused and never ran; its next call asks again$`, r.stdout)
	require.Regexp(t, `(?m)^approval\s+timed_out, episode 1$`, r.stdout)
	require.Regexp(t, `(?m)^approval decided\s+\S+ by oncekey \(approval timeout\)$`, r.stdout)

	r = cli(t, env, "approve", key, "--tenant", "acme")
	requireOneLine(t, r, exitFailed, "is already timed out by oncekey (approval timeout) at ", "the next call of the operation asks again, at episode 2")
	views := approvalsJSON(t, env, "--status", "timed_out")
	require.Len(t, views, 1)
	require.Equal(t, oncekeystore.ApprovalTimedOut, views[0].Status)
}

// stats says how many calls wait for approval; a schema migrated before approvals (no approvals
// table) still shows its records and stats, and approvals says to migrate.
func TestStatsCountApprovalsAndOlderSchema(t *testing.T) {
	url, s, pool := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 1 EUR")
	seedApproval(t, s, "globex", "IssueRefund", "wf-2", "refund", "refund 2 EUR")
	key := seed(t, s, "acme", "CreateTicket", "wf-3", "ticket", oncekeystore.StatusApplied, nil)

	r := cli(t, env, "stats", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var sv statsView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sv))
	require.Equal(t, 2, sv.ApprovalsPending)
	require.NotNil(t, sv.OldestApproval)
	require.Equal(t, map[string]int{"IssueRefund": 2}, sv.ApprovalsPendingByTool)
	require.Zero(t, sv.ByStatus[oncekeystore.StatusPending], "a call waiting for approval has no record")
	r = cli(t, env, "stats", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "; 1 call(s) wait for approval, the oldest asked ")
	require.Contains(t, r.stdout, "(`oncekey approvals --tenant acme` lists them)")
	// The table labels its record columns and counts the waiting calls in a column of their own,
	// so PENDING 0 beside them does not contradict the last line; a tool with only waiting calls
	// has a row.
	lines := strings.Split(r.stdout, "\n")
	require.Regexp(t, `^\s+RECORDS:\s+AWAITING APPROVAL$`, lines[0])
	require.Regexp(t, `^TOOL\s+PENDING\s+APPLIED\s+FAILED\s+UNKNOWN\s+RELEASED\s+EXPIRED\s+TOTAL\s+\(NO RECORD YET\)$`, lines[1])
	require.Regexp(t, `^CreateTicket\s+0\s+1\s+0\s+0\s+0\s+0\s+1\s+0$`, lines[2])
	require.Regexp(t, `^IssueRefund\s+0\s+0\s+0\s+0\s+0\s+0\s+0\s+1$`, lines[3])
	require.Regexp(t, `^all tools\s+0\s+1\s+0\s+0\s+0\s+0\s+1\s+1$`, lines[4])

	_, err := pool.Exec(context.Background(), "DROP TABLE oncekey_approvals")
	require.NoError(t, err)
	r = cli(t, env, "stats")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "approval")
	r = cli(t, env, "show", key, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "approval")
	r = cli(t, env, "approvals")
	requireOneLine(t, r, exitFailed, "has oncekey's records but no approvals table yet (pgstore migration 003_approvals); run `oncekey migrate` with the same database settings to add it")
}

// Every flag's help names its value as a placeholder (`--episode N`): pflag takes the first
// back-quoted word of a usage string as the value's name, so a command quoted there would show as
// `--episode oncekey approvals`.
func TestFlagHelpNamesItsValue(t *testing.T) {
	root := newRootCmd(&app{getenv: func(string) string { return "" }})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			require.NotContains(t, name, " ", "%s --%s shows its value as %q", c.CommandPath(), f.Name, name)
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// A decision sent to another namespace than the one whose workflow asked says which namespace,
// with the command, before anything is sent.
func TestDecideInAnotherNamespace(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_NAMESPACE": "agents"}
	key := seedApproval(t, s, "acme", "IssueRefund", "wf-1", "refund", "refund 1 EUR") // asked in namespace default
	r := cli(t, env, "deny", key, "--tenant", "acme", "--reason", "it's $(too) much")
	requireOneLine(t, r, exitUsage, "the approval of "+key+" was asked by a workflow in namespace default, and its approval workflow runs there, not in agents; nothing was sent")
	cmd := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(r.stderr)
	require.NotNil(t, cmd)
	require.Equal(t, []string{"oncekey", "deny", key, "--tenant", "acme", "--episode", "1", "--address", "127.0.0.1:1", "--namespace", "default", "--reason", "it's $(too) much"}, shelltest.Args(t, cmd[1]))

	// With --episode the store is read only once Temporal says nothing waits in this namespace.
	env["TEMPORAL_ADDRESS"] = testenv.TemporalHostPort(t)
	r = cli(t, env, "approve", key, "--tenant", "acme", "--episode", "1")
	requireOneLine(t, r, exitUsage, "was asked by a workflow in namespace default, and its approval workflow runs there, not in agents")

	// A namespace Temporal does not have is a usage error, not an outage, for resolve too.
	delete(env, "DATABASE_URL")
	r = cli(t, env, "resolve", key, "--tenant", "acme", "--epoch", "1", "--not-applied")
	requireOneLine(t, r, exitUsage, "Temporal has no namespace agents (", "give --namespace, or TEMPORAL_NAMESPACE, the namespace your workers run in")
}

// Times to go and times ago are cut down to the unit below the largest, so 3h59m left does not
// print as 3h.
func TestDurationsKeepTheirMinutes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second:                              "45s",
		12*time.Minute + 59*time.Second:               "12m",
		3*time.Hour + 59*time.Minute + 30*time.Second: "3h59m",
		23 * time.Hour:                                "23h",
		47*time.Hour + time.Minute:                    "47h1m",
		48 * time.Hour:                                "",
	} {
		require.Equal(t, want, span(d), "%s", d)
	}
	require.Equal(t, "in 3h59m", until(time.Now().Add(3*time.Hour+59*time.Minute+30*time.Second)))
	require.Equal(t, "2h5m ago", age(time.Now().Add(-2*time.Hour-5*time.Minute-time.Second)))
	require.Equal(t, "passed", until(time.Now().Add(-time.Second)))
}

// A call without a step ID reads the same in list, show and the approval view: its record's step
// "<run ID>/<activity ID>" is marked (no step ID), and its approval, which stores no step, prints
// the mark alone.
func TestNoStepIDReadsTheSame(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	implicit := "0f8c2a5e-1b7d-4c3e-9a6f-2d4b8e1c7a90/5"
	rec := seed(t, s, "acme", "RefundOrder", "refund-L", implicit, oncekeystore.StatusApplied, nil)
	ap := seedApproval(t, s, "acme", "RefundOrder", "refund-E", "", "refund 5 EUR")
	named := seed(t, s, "acme", "RefundOrder", "refund-N", "refund", oncekeystore.StatusApplied, nil)

	r := cli(t, env, "list", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^acme\s+`+rec+`\s+RefundOrder\s+applied\s+1\s+refund-L\s+`+implicit+` \(no step ID\)\s+`, r.stdout)
	require.Regexp(t, `(?m)^acme\s+`+named+`\s+RefundOrder\s+applied\s+1\s+refund-N\s+refund\s+`, r.stdout)
	r = cli(t, env, "show", rec, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^step\s+`+implicit+` \(no step ID\)$`, r.stdout)
	r = cli(t, env, "show", ap, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^step\s+\(no step ID\)$`, r.stdout)
	require.Equal(t, implicit, showJSON(t, env, rec, "acme").StepID, "--json keeps the stored step")
}
