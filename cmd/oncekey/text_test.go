package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                   "",
		"CreateTicket":       "CreateTicket",
		"acme corp":          "acme corp",
		"wf-1/3":             "wf-1/3",
		"réservation 予約":     "réservation 予約",
		"a\r\nforged":        `"a\r\nforged"`,
		"red\x1b[31m":        `"red\x1b[31m"`,
		"a\tb":               `"a\tb"`,
		"bell\a":             `"bell\a"`,
		"\xff\xfe":           `"\xff\xfe"`,
		"right\u202eto-left": `"right\u202eto-left"`,
		"c1\u009b31m":        `"c1\u009b31m"`,
		`"quoted"`:           `"\"quoted\""`,
	} {
		require.Equal(t, want, printable(in), "%q", in)
	}
	require.Equal(t, "-", cell(""))
	require.Equal(t, `{"message":"a b"}`, printableJSON([]byte("{\r\n\t\"message\":\n\"a b\"}")), "whitespace between tokens is compacted away")
	require.Equal(t, `"connection reset"`, printableJSON([]byte(`"connection reset"`)), "a JSON string keeps its own quotes")
	require.Equal(t, `"{\"m\":\"\u202e\"}"`, printableJSON([]byte("{\"m\":\"\u202e\"}")))
}

// Stored strings (from workflows, and so from models' tool calls) holding terminal escapes, CR
// and LF, tabs and bidi overrides are printed escaped by list, show and stats, so they can neither
// drive the terminal nor forge a line or a column; ordinary values print as they are. --json
// escapes them itself and keeps them exact.
func TestHumanOutputEscapesStoredStrings(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	ctx := context.Background()
	const (
		tenant = "acme\x1b]0;pwned\a"
		tool   = "Evil\x1b[31mTool"
		wf     = "wf\r\nacme  ok1_forged  Book  applied"
		step   = "step\tcol"
		ref    = "REF\u202eX"
		note   = "checked\r\nresolved by: root"
		by     = "\x1b[2Jops"
	)
	key := seed(t, s, tenant, tool, wf, step, oncekeystore.StatusUnknown, nil)
	_, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: tenant, OperationKey: key, Epoch: 1, Status: oncekeystore.StatusApplied,
		EffectReference: ref, ResolvedBy: by, Note: note})
	require.NoError(t, err)
	result, err := reconcile.EncodeResult(nil, []byte("{\"id\":\"\u202eTCK\"}"))
	require.NoError(t, err)
	plain := seed(t, s, "globex", "CreateTicket", "wf-1", "create_ticket", oncekeystore.StatusApplied, result)

	requireSafe := func(t *testing.T, out string) {
		t.Helper()
		for _, bad := range []string{"\x1b", "\r", "\a", "\t", "\u202e"} {
			require.NotContains(t, out, bad, "raw %q in output:\n%s", bad, out)
		}
	}
	escaped := []string{`"acme\x1b]0;pwned\a"`, `"Evil\x1b[31mTool"`, `"wf\r\nacme  ok1_forged  Book  applied"`, `"step\tcol"`, `"REF\u202eX"`, `"\x1b[2Jops"`}

	r := cli(t, env, "list")
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), "a header and one line a record:\n%s", r.stdout)
	for _, e := range escaped {
		require.Contains(t, r.stdout, e)
	}
	require.Regexp(t, `(?m)^globex\s+`+plain+`\s+CreateTicket\s+applied\s+1\s+wf-1\s+create_ticket\s+.*REF-create_ticket\s+-$`, r.stdout, "ordinary values are unchanged")

	r = cli(t, env, "show", key, "--tenant", tenant, "--show-result")
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		require.Regexp(t, `^(operation key|tenant|namespace|tool|version|effect class|status|workflow|step|epoch|lease until|effect reference|resolved by|note|failure|fingerprint|created|updated|retained until|tombstone until|pending since|unknown since|retained|result) `, line, "every line is a field of its own")
	}
	for _, e := range append(escaped, `"checked\r\nresolved by: root"`) {
		require.Contains(t, r.stdout, e)
	}

	r = cli(t, env, "show", plain, "--tenant", "globex", "--show-result")
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	require.Regexp(t, `(?m)^tool\s+CreateTicket$`, r.stdout)
	require.Regexp(t, `(?m)^workflow\s+wf-1$`, r.stdout)
	require.Regexp(t, `(?m)^effect reference\s+REF-create_ticket$`, r.stdout)
	require.Regexp(t, `(?m)^result\s+"\{\\"id\\":\\"\\u202eTCK\\"\}"$`, r.stdout, "a stored result is escaped too")

	r = cli(t, env, "stats")
	require.Equal(t, 0, r.code, r.stderr)
	requireSafe(t, r.stdout)
	require.Equal(t, 6, strings.Count(r.stdout, "\n"), "two header rows, two tools, the total, the tenants line:\n%s", r.stdout)
	require.Contains(t, r.stdout, `"Evil\x1b[31mTool"`)
	require.Regexp(t, `(?m)^CreateTicket\s+0\s+1\s`, r.stdout)

	// JSON escapes control characters itself, and keeps the values exact.
	r = cli(t, env, "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	for _, bad := range []string{"\x1b", "\r", "\a", "\t"} {
		require.NotContains(t, r.stdout, bad)
	}
	var views []recordView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	for _, v := range views {
		if v.OperationKey == key {
			require.Equal(t, []string{tenant, tool, wf, step, ref, note, by}, []string{v.Tenant, v.Tool, v.WorkflowID, v.StepID, v.EffectReference, v.Note, v.ResolvedBy})
		}
	}
}
