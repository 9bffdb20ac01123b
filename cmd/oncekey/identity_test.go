package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `oncekey identity fetch` writes a real run's history; `identity list` reads the protected call
// and the operation key the worker recorded for it, the key `oncekey list` shows in the store.
func TestIdentityFetchAndList(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "")
	b := &bookings{}
	run := startBooking(t, c, url, b, "acme")
	booked(t, run)
	out := t.TempDir()

	r := cli(t, env, "identity", "fetch", "--workflow-id", run.GetID(), "--out", out)
	require.Equal(t, 0, r.code, r.stderr)
	file := strings.TrimSpace(r.stdout)
	require.Equal(t, filepath.Join(out, run.GetID()+"."+run.GetRunID()+".json"), file)
	require.Contains(t, r.stderr, "okworker.CheckIdentityFiles")

	r = cli(t, env, "identity", "list", file)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	fields := strings.Fields(lines[1])
	require.Equal(t, []string{"Book", "acme", "book", "completed", `""`}, []string{fields[2], fields[4], fields[5], fields[6], fields[7]})
	listed := cli(t, env, "list", "--tenant", "acme")
	require.Equal(t, 0, listed.code, listed.stderr)
	require.Contains(t, listed.stdout, fields[3][:16], "the key in the history is the record's")

	r = cli(t, env, "identity", "fetch", "--query", "WorkflowId = '"+run.GetID()+"'", "--out", t.TempDir())
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasSuffix(strings.TrimSpace(r.stdout), run.GetRunID()+".json"), r.stdout)

	r = cli(t, env, "identity", "fetch", "--workflow-id", "no-such-workflow-"+t.Name(), "--out", t.TempDir())
	require.Equal(t, exitNotFound, r.code, r.stderr)
}

// Bad input gets a message naming the file and what is wrong with it, and a non-zero exit.
func TestIdentityListBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for _, tc := range []struct{ name, path, want string }{
		{"not JSON", write("a.json", "Progress:\n  ID: 1\n"), "is not JSON"},
		{"truncated", write("b.json", `{"events": [{"eventId": "1", "eventType": "EVENT_TYPE_WORKFLOW_EXEC`), "cut off"},
		{"not a history", write("c.json", `{"events": [{"eventId": "5", "eventType": "EVENT_TYPE_TIMER_FIRED", "timerFiredEventAttributes": {}}]}`), "does not start with the workflow's start"},
		{"no oncekey activity", write("d.json", `{"events": [{"eventId": "1", "eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED", "workflowExecutionStartedEventAttributes": {"workflowId": "w"}}]}`), "holds no call of a protected tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, nil, "identity", "list", tc.path)
			require.Equal(t, exitFailed, r.code)
			require.Contains(t, r.stderr, tc.path)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	r := cli(t, nil, "identity", "fetch", "--out", dir)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--workflow-id")
}
