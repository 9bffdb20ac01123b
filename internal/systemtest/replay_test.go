package systemtest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// The replay suite: histories recorded on a dev server by the end-to-end tests (every path:
// success and replay, not applied and run again, unknown then each resolution by update and by
// signal, timeouts, escalation, cancellation), replayed here with the SDK's workflow replayer and
// the plugin, from the history alone, as a user's replay test in CI does. A change to oncekey's
// workflow side that replays them differently is a nondeterminism error for every user's running
// workflows: put it behind workflow.GetVersion.
//
// Re-record them (after adding a path, or on purpose after a breaking change) with
//
//	ONCEKEY_RECORD_HISTORIES=1 go test -count=1 -run 'TestE2E' ./worker/
//
// which writes testdata/histories/<test>.<workflow>.<effect class>.json for every history an
// end-to-end test replays. The files are what `temporal workflow show --output json` prints.
const recordHistoriesEnv = "ONCEKEY_RECORD_HISTORIES"

const historiesDir = "testdata/histories"

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// record writes h to historiesDir when ONCEKEY_RECORD_HISTORIES is set. A reconciliation (or
// approval) workflow's ID holds its operation key, which differs per run; its file is named
// "reconcile" (or "approval").
func (e *e2e) record(t *testing.T, id string, h *historypb.History) {
	t.Helper()
	if os.Getenv(recordHistoriesEnv) == "" {
		return
	}
	role := id
	switch {
	case strings.HasPrefix(id, reconcile.WorkflowIDPrefix):
		role = "reconcile"
	case strings.HasPrefix(id, reconcile.ApprovalWorkflowIDPrefix):
		role = "approval"
	}
	name := unsafeName.ReplaceAllString(t.Name(), "_") + "." + unsafeName.ReplaceAllString(role, "_") + "." + e.effect.String() + ".json"
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(historiesDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(historiesDir, name), b, 0o644))
}

// requiredPaths names, for each path the suite must cover, a recorded history file (by its
// test name) that takes it.
var requiredPaths = map[string]string{
	"success and replay of a stored result": "TestE2EInFlightThenReplay",
	"not applied, run again":                "TestE2ENotAppliedLoopReplays",
	"unknown, receipt decides":              "TestE2EResponseLostAfterCommitReceipt",
	"unknown, resolved applied (signal)":    "TestE2EResolveApplied",
	"unknown, resolved not applied":         "TestE2EResolveNotApplied",
	"unknown, resolved failed":              "TestE2EResolveFailed",
	"unknown, resolved by update":           "TestE2EResolveByUpdate",
	"start-to-close timeout":                "TestE2EStartToCloseTimeoutAfterCommit",
	"timeout without a step ID":             "TestE2EStartToCloseTimeoutDefaultStep",
	"heartbeat timeout":                     "TestE2EHeartbeatTimeoutAfterCommit",
	"escalation timeout":                    "TestE2EEscalation",
	"cancelled while the tool runs":         "TestE2ECancelledWhileEffectfulRuns",
	"cancelled while reconciling":           "TestE2ECancelledWhileReconciling",
	"two workflows blocked on one key":      "TestE2ETwoWorkflowsOneResolution",
	"idempotent tool, response lost":        "TestE2EResponseLostAfterCommitIdempotent",
	"approval, approved":                    "TestE2EApprovalApproved",
	"approval, denied":                      "TestE2EApprovalDenied",
	"approval, timed out":                   "TestE2EApprovalTimedOut",
	"approval shared by a re-proposal":      "TestE2EApprovalSharedByReproposal",
}

// TestReplayRecordedHistories replays every recorded history with the plugin installed.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	sort.Strings(files)
	require.NotEmpty(t, files, "no recorded histories: record them with %s=1 (see the comment above)", recordHistoriesEnv)
	have := map[string]bool{}
	for _, f := range files {
		have[strings.SplitN(filepath.Base(f), ".", 2)[0]] = true
	}
	for path, test := range requiredPaths {
		require.True(t, have[test], "no recorded history covers %q (%s)", path, test)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			parts := strings.Split(filepath.Base(f), ".")
			require.Len(t, parts, 4, "file name: <test>.<workflow>.<effect class>.json")
			var effect oncekey.Effect
			for _, e := range []oncekey.Effect{oncekey.ReadOnly, oncekey.Idempotent, oncekey.Effectful} {
				if e.String() == parts[2] {
					effect = e
				}
			}
			require.NotZero(t, effect, "unknown effect class %q", parts[2])
			approval := strings.HasPrefix(parts[0], "TestE2EApproval")
			replay := func(p oncekey.Policy, keys ...oncekey.HeaderKey) error {
				h, err := client.HistoryFromJSON(mustOpen(t, f), client.HistoryJSONOptions{})
				require.NoError(t, err)
				reg := oncekey.NewRegistry()
				require.NoError(t, reg.Set(newLedger().CreateTicket, p))
				plugin, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg, HeaderKeys: keys})
				require.NoError(t, err)
				r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Plugins: []sdkworker.Plugin{plugin}})
				require.NoError(t, err)
				registerWorkflows(r)
				return r.ReplayWorkflowHistory(quiet{}, h)
			}
			// Whether a call needs approval, and what it asks, are read from the history: the
			// policy only has to have an Approval.
			withApproval := oncekey.Policy{Effect: effect, Approval: &oncekey.ApprovalPolicy{}}
			// Histories recorded before header keys were turned on replay with them on (the
			// binding only adds a header, and headers are not compared on replay).
			if approval {
				require.NoError(t, replay(withApproval))
				require.NoError(t, replay(withApproval, keyOld), "with HeaderKeys")
				return
			}
			require.NoError(t, replay(oncekey.Policy{Effect: effect}))
			require.NoError(t, replay(oncekey.Policy{Effect: effect}, keyOld), "with HeaderKeys")
			// A tool given an approval policy while its workflows run: their histories replay
			// (their calls were made without the marker, so no approval is asked for them).
			require.NoError(t, replay(withApproval), "with Policy.Approval added")
		})
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}
