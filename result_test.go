package oncekey_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"regexp"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
)

// details is the shape of the detail payload the interceptor attaches to its application errors.
type details struct {
	OperationKey string          `json:"operation_key,omitempty"`
	Tool         string          `json:"tool"`
	Outcome      oncekey.Outcome `json:"outcome"`
	Replay       bool            `json:"replay,omitempty"`
	Reason       string          `json:"reason,omitempty"`
}

// activityError turns err into what a workflow receives when an activity fails with it: the
// SDK's failure converter encodes it (details through the data converter) into an activity
// failure and decodes that into a *temporal.ActivityError wrapping the decoded cause.
func activityError(err error) error {
	fc := temporal.GetDefaultFailureConverter()
	f := &failurepb.Failure{
		Message: "activity error",
		FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{
			ActivityId: "7", ActivityType: &commonpb.ActivityType{Name: "CreateTicket"},
			RetryState: enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE,
		}},
		Cause: fc.ErrorToFailure(err),
	}
	out := fc.FailureToError(f)
	var ae *temporal.ActivityError
	if !errors.As(out, &ae) {
		panic(fmt.Sprintf("not an activity error: %T", out))
	}
	return out
}

func appErr(typ string, nonRetryable bool, d ...any) error {
	return temporal.NewApplicationErrorWithOptions("msg "+typ, typ, temporal.ApplicationErrorOptions{NonRetryable: nonRetryable, Details: d})
}

func TestLabel(t *testing.T) {
	t.Parallel()
	const key = "ok1_0000000000000000000000000000000000000000000000000000000000000001"
	cause := errors.New("downstream said 503")
	cases := []struct {
		name      string
		err       error
		status    oncekey.Outcome
		safe      bool
		next      string
		key       string
		retry     time.Duration
		replayed  bool
		errSubstr string
	}{
		{"nil", nil, oncekey.OutcomeApplied, true, oncekey.NextNone, "", 0, false, ""},

		{"indeterminate", &oncekey.IndeterminateOutcomeError{OperationKey: key, Tool: "T", Cause: cause}, oncekey.OutcomeUnknown, false, oncekey.NextReconcile, key, 0, false, "unknown"},
		{"indeterminate app error", activityError(appErr(oncekey.ErrTypeIndeterminate, true, details{OperationKey: key, Outcome: oncekey.OutcomeUnknown})), oncekey.OutcomeUnknown, false, oncekey.NextReconcile, key, 0, false, ""},
		{"result too large", &oncekeystore.ResultTooLargeError{OperationKey: key, Size: 2, Limit: 1}, oncekey.OutcomeUnknown, false, oncekey.NextReconcile, key, 0, false, ""},
		{"result too large app error", activityError(appErr(oncekey.ErrTypeResultTooLarge, true)), oncekey.OutcomeUnknown, false, oncekey.NextReconcile, "", 0, false, ""},
		{"result too large, effectful, unknown", activityError(appErr(oncekey.ErrTypeResultTooLarge, true, details{OperationKey: key, Tool: "T", Outcome: oncekey.OutcomeUnknown})), oncekey.OutcomeUnknown, false, oncekey.NextReconcile, key, 0, false, ""},
		{"result too large, idempotent, released", activityError(appErr(oncekey.ErrTypeResultTooLarge, true, details{OperationKey: key, Tool: "T", Outcome: oncekey.OutcomeFailed})), oncekey.OutcomeFailed, true, oncekey.NextStop, key, 0, false, ""},
		{"start-to-close timeout", activityError(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)), oncekey.OutcomeUnknown, false, oncekey.NextReconcile, "", 0, false, ""},
		{"heartbeat timeout", activityError(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)), oncekey.OutcomeUnknown, false, oncekey.NextReconcile, "", 0, false, ""},
		{"cancelled", activityError(temporal.NewCanceledError()), oncekey.OutcomeUnknown, false, oncekey.NextReconcile, "", 0, false, ""},

		{"fingerprint mismatch", &oncekey.FingerprintMismatchError{OperationKey: key, Stored: "a", Got: "b"}, oncekey.OutcomeConflict, false, oncekey.NextFix, key, 0, false, "different arguments"},
		{"approval denied", &oncekey.ApprovalRequiredError{OperationKey: key, Tool: "Refund", Status: oncekeystore.ApprovalDenied, DecidedBy: "alice", Reason: "not this customer"}, oncekey.OutcomeRejected, false, oncekey.NextStop, key, 0, false, "denied approval by alice"},
		{"approval denied app error", activityError(appErr(oncekey.ErrTypeApproval, true, details{OperationKey: key, Tool: "Refund", Outcome: oncekey.OutcomeRejected, Reason: "approval denied"})), oncekey.OutcomeRejected, false, oncekey.NextStop, key, 0, false, ""},
		{"approval timed out", &oncekey.ApprovalRequiredError{OperationKey: key, Tool: "Refund", Status: oncekeystore.ApprovalTimedOut}, oncekey.OutcomeRejected, false, oncekey.NextAsk, key, 0, false, "nobody approved"},
		{"approval timed out app error", activityError(appErr(oncekey.ErrTypeApproval, true, details{OperationKey: key, Tool: "Refund", Outcome: oncekey.OutcomeRejected, Reason: "approval timed out"})), oncekey.OutcomeRejected, false, oncekey.NextAsk, key, 0, false, ""},
		{"no approval app error", activityError(appErr(oncekey.ErrTypeApproval, true, details{OperationKey: key, Tool: "Refund", Outcome: oncekey.OutcomeRejected, Reason: "not approved"})), oncekey.OutcomeRejected, false, oncekey.NextAsk, key, 0, false, ""},
		{"fingerprint mismatch app error", activityError(appErr(oncekey.ErrTypeFingerprintMismatch, true, details{OperationKey: key})), oncekey.OutcomeConflict, false, oncekey.NextFix, key, 0, false, ""},
		{"repeat refused app error", activityError(appErr(oncekey.ErrTypeRepeatRefused, true, details{OperationKey: key})), oncekey.OutcomeConflict, false, oncekey.NextStop, key, 0, false, ""},
		{"arguments mismatch app error", activityError(appErr(oncekey.ErrTypeArgsMismatch, true)), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, ""},
		{"unbound headers app error", activityError(appErr(oncekey.ErrTypeUnboundHeaders, true)), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, ""},
		{"unauthorized app error", activityError(appErr(oncekey.ErrTypeUnauthorized, true)), oncekey.OutcomeRejected, false, oncekey.NextStop, "", 0, false, ""},

		{"in flight", &oncekey.InFlightError{OperationKey: key, RetryAfter: 3 * time.Second}, oncekey.OutcomeInFlight, true, oncekey.NextPoll, key, 3 * time.Second, false, ""},
		{"in flight app error", activityError(temporal.NewApplicationErrorWithOptions("busy", oncekey.ErrTypeInFlight, temporal.ApplicationErrorOptions{NextRetryDelay: 2 * time.Second})), oncekey.OutcomeInFlight, true, oncekey.NextPoll, "", 2 * time.Second, false, ""},

		{"expired", &oncekey.ExpiredOperationError{OperationKey: key, ExpiredAt: time.Unix(0, 0)}, oncekey.OutcomeExpired, false, oncekey.NextAsk, key, 0, false, "expired"},
		{"expired app error", activityError(appErr(oncekey.ErrTypeExpired, true)), oncekey.OutcomeExpired, false, oncekey.NextAsk, "", 0, false, ""},

		{"store unavailable", &oncekeystore.StoreUnavailableError{Op: "claim", Err: cause}, oncekey.OutcomeFailed, true, oncekey.NextPoll, "", 0, false, "store unavailable"},
		{"store unavailable app error", activityError(appErr(oncekey.ErrTypeStoreUnavailable, false)), oncekey.OutcomeFailed, true, oncekey.NextPoll, "", 0, false, ""},
		{"not applied", oncekey.NotApplied(cause), oncekey.OutcomeFailed, true, oncekey.NextPoll, "", 0, false, "503"},
		{"not applied app error", activityError(appErr(oncekey.ErrTypeNotApplied, false)), oncekey.OutcomeFailed, true, oncekey.NextPoll, "", 0, false, ""},
		{"not applied, non-retryable", activityError(appErr(oncekey.ErrTypeNotApplied, true)), oncekey.OutcomeFailed, true, oncekey.NextStop, "", 0, false, ""},
		{"schedule-to-start timeout", activityError(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)), oncekey.OutcomeFailed, true, oncekey.NextPoll, "", 0, false, ""},

		{"failed", oncekey.Failed(cause), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, "503"},
		{"failed app error", activityError(appErr(oncekey.ErrTypeFailed, true)), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, ""},
		{"remembered failure", activityError(appErr(oncekey.ErrTypeFailed, true, details{OperationKey: key, Outcome: oncekey.OutcomeFailed, Replay: true})), oncekey.OutcomeFailed, false, oncekey.NextStop, key, 0, true, ""},
		{"unsettled app error", activityError(appErr(oncekey.ErrTypeUnsettled, false, details{OperationKey: key})), oncekey.OutcomeFailed, true, oncekey.NextPoll, key, 0, false, ""},
		{"config app error", activityError(appErr(oncekey.ErrTypeConfig, true)), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, ""},
		{"no key", fmt.Errorf("derive: %w", oncekey.ErrNoKey), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, "no operation key"},
		{"plain error", cause, oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, "503"},
		{"other application error", activityError(temporal.NewApplicationError("card declined", "PaymentDeclined")), oncekey.OutcomeFailed, false, oncekey.NextStop, "", 0, false, "card declined"},
		{"wrapped typed error", fmt.Errorf("tool: %w", &oncekey.InFlightError{OperationKey: key}), oncekey.OutcomeInFlight, true, oncekey.NextPoll, key, 0, false, ""},
	}
	seen := map[oncekey.Outcome]bool{}
	for _, c := range cases {
		tr := oncekey.Label("result", c.err)
		require.Equal(t, c.status, tr.Status, c.name)
		require.Equal(t, c.safe, tr.SafeToRepeat, c.name)
		require.Equal(t, c.next, tr.NextAction, c.name)
		require.Equal(t, c.key, tr.OperationKey, c.name)
		require.Equal(t, c.retry, tr.RetryAfter, c.name)
		require.Equal(t, c.replayed, tr.Replayed, c.name)
		require.Equal(t, oncekey.ModelText(tr.Status, tr.NextAction, tr.Reason), tr.Text, c.name)
		if c.err == nil {
			require.Equal(t, "result", tr.Result)
		} else {
			require.Nil(t, tr.Result, c.name)
			require.Contains(t, c.err.Error(), c.errSubstr, c.name)
			// The operator's text stays in the Go error: nothing of it reaches the model's text.
			b, err := json.Marshal(tr)
			require.NoError(t, err)
			require.NotContains(t, string(b), c.err.Error(), c.name)
		}
		seen[tr.Status] = true
	}
	r := oncekey.LabelReplay("stored", key)
	require.Equal(t, oncekey.ToolResult{Status: oncekey.OutcomeReplayed, OperationKey: key, SafeToRepeat: true, Replayed: true,
		NextAction: oncekey.NextNone, Result: "stored", Text: oncekey.ModelText(oncekey.OutcomeReplayed, oncekey.NextNone, "")}, r)
	seen[r.Status] = true
	for _, o := range []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeReplayed, oncekey.OutcomeInFlight,
		oncekey.OutcomeRejected, oncekey.OutcomeConflict, oncekey.OutcomeUnknown, oncekey.OutcomeExpired, oncekey.OutcomeFailed} {
		require.True(t, seen[o], "no case labels %s", o)
	}
}

func TestLabelContextErrors(t *testing.T) {
	t.Parallel()
	// A context error inside an activity is not proof of anything: it is a plain failure to stop on.
	tr := oncekey.Label(nil, context.DeadlineExceeded)
	require.Equal(t, oncekey.OutcomeFailed, tr.Status)
	require.False(t, tr.SafeToRepeat)
}

func TestToolResultJSON(t *testing.T) {
	t.Parallel()
	tr := oncekey.ToolResult{Status: oncekey.OutcomeInFlight, OperationKey: "ok1_x", SafeToRepeat: true,
		NextAction: oncekey.NextPoll, RetryAfter: 1500 * time.Millisecond, Text: "busy"}
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"in_flight","operation_key":"ok1_x","safe_to_repeat":true,"next_action":"poll",
		"retry_after_seconds":1.5,"text":"busy"}`, string(b))
	var back oncekey.ToolResult
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, tr, back)

	b, err = json.Marshal(oncekey.Label(map[string]int{"id": 7}, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"applied","safe_to_repeat":true,"next_action":"none","reason":"not_recorded","result":{"id":7},"text":`+
		mustJSON(t, oncekey.ModelText(oncekey.OutcomeApplied, oncekey.NextNone, oncekey.ReasonNotRecorded))+`}`, string(b))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestModelTexts: every text for a model is short, says what to do, and carries no operator
// detail; every status, next action and reason Label gives has its own text.
func TestModelTexts(t *testing.T) {
	t.Parallel()
	operator := regexp.MustCompile(`(?i)ok1_|fingerprint|oncekey|resolve|policy|postgres|schema|temporal|--|\.go\b`)
	goName := regexp.MustCompile(`\b[A-Z][a-z]+[A-Z]\w*`) // a Go identifier such as StepID or Policy.Exclude
	texts := map[string]bool{}
	for _, e := range oncekey.ModelTexts() {
		name := fmt.Sprintf("%s/%s/%s", e.Status, e.Next, e.Reason)
		require.Equal(t, e.Text, oncekey.ModelText(e.Status, e.Next, e.Reason), name)
		require.NotEmpty(t, e.Text)
		require.LessOrEqual(t, len(e.Text), 300, name)
		require.NotRegexp(t, operator, e.Text, name)
		require.NotRegexp(t, goName, e.Text, name)
		require.False(t, texts[e.Text], "%s shares its text", name)
		texts[e.Text] = true
	}
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeFailed, oncekey.NextStop, ""), oncekey.ModelText("nonsense", "x", ""))
}

// TestModelTextsTrueToTheCase pins what issue 25 found false or unhelpful: a result oncekey did
// not record (a oncekey.ReadOnly tool) is not told to stop calling; a first call confirmed by
// reconciliation is not told it is a replay; the unknown text does not promise that anyone still
// checks or will tell the user; the three causes of a refusal and a conflict each have a text.
func TestModelTextsTrueToTheCase(t *testing.T) {
	t.Parallel()
	readOnly := oncekey.ModelText(oncekey.OutcomeApplied, oncekey.NextNone, oncekey.ReasonNotRecorded)
	require.NotContains(t, readOnly, "Do not call it again")
	confirmed := oncekey.ModelText(oncekey.OutcomeApplied, oncekey.NextNone, oncekey.ReasonConfirmed)
	require.NotContains(t, confirmed, "made before")
	require.Contains(t, confirmed, "confirmed")
	unknown := oncekey.ModelText(oncekey.OutcomeUnknown, oncekey.NextReconcile, "")
	require.NotContains(t, unknown, "being checked")
	require.NotContains(t, unknown, "will be told")
	require.Contains(t, unknown, "tell the user")
	conflict := oncekey.ModelText(oncekey.OutcomeConflict, oncekey.NextFix, "")
	require.Contains(t, conflict, "different arguments")
	require.NotContains(t, conflict, "approv")
	refusals := map[string]bool{}
	for _, r := range []struct{ next, reason string }{
		{oncekey.NextStop, oncekey.ReasonDenied}, {oncekey.NextAsk, oncekey.ReasonNotApproved}, {oncekey.NextStop, oncekey.ReasonNotAuthorized},
	} {
		text := oncekey.ModelText(oncekey.OutcomeRejected, r.next, r.reason)
		require.NotEqual(t, oncekey.ModelText(oncekey.OutcomeFailed, oncekey.NextStop, ""), text, r.reason)
		require.NotContains(t, text, "different arguments", r.reason)
		refusals[text] = true
	}
	require.Len(t, refusals, 3)

	// Label gives each its case.
	const key = "ok1_0000000000000000000000000000000000000000000000000000000000000003"
	tr := oncekey.Label(nil, activityError(appErr(oncekey.ErrTypeUnauthorized, true, details{OperationKey: key})))
	require.Equal(t, [3]string{"rejected", oncekey.NextStop, oncekey.ReasonNotAuthorized}, [3]string{string(tr.Status), tr.NextAction, tr.Reason})
	tr = oncekey.Label(nil, &oncekey.ApprovalRequiredError{OperationKey: key, Status: oncekeystore.ApprovalTimedOut})
	require.Equal(t, [3]string{"rejected", oncekey.NextAsk, oncekey.ReasonNotApproved}, [3]string{string(tr.Status), tr.NextAction, tr.Reason})
	tr = oncekey.Label(nil, &oncekey.ApprovalRequiredError{OperationKey: key, Status: oncekeystore.ApprovalDenied})
	require.Equal(t, [3]string{"rejected", oncekey.NextStop, oncekey.ReasonDenied}, [3]string{string(tr.Status), tr.NextAction, tr.Reason})
	tr = oncekey.Label(nil, &oncekey.FingerprintMismatchError{OperationKey: key})
	require.Equal(t, [3]string{"conflict", oncekey.NextFix, ""}, [3]string{string(tr.Status), tr.NextAction, tr.Reason})
	require.False(t, tr.SafeToRepeat)
	require.Equal(t, conflict, tr.Text)

	// A repeat refused by OnHitFailFast is a conflict to stop on, with a text of its own.
	for _, err := range []error{activityError(appErr(oncekey.ErrTypeRepeatRefused, true, details{OperationKey: key})),
		&oncekey.RepeatRefusedError{OperationKey: key, Tool: "Pay", Status: oncekeystore.StatusApplied}} {
		tr = oncekey.Label(nil, err)
		require.Equal(t, [3]string{"conflict", oncekey.NextStop, oncekey.ReasonRepeat}, [3]string{string(tr.Status), tr.NextAction, tr.Reason})
		require.Equal(t, key, tr.OperationKey)
		require.NotEqual(t, oncekey.ModelText(oncekey.OutcomeFailed, oncekey.NextStop, ""), tr.Text)
		require.Contains(t, tr.Text, "already done")
	}
}

// TestLabelRawValue: a result read as a converter.RawValue tells replayed from applied, with the
// key and effect reference, from the metadata the interceptor adds.
func TestLabelRawValue(t *testing.T) {
	t.Parallel()
	p, err := converter.GetDefaultDataConverter().ToPayload(map[string]int{"id": 7})
	require.NoError(t, err)
	p.Metadata[wire.MetadataOutcome] = []byte("replayed")
	p.Metadata[wire.MetadataOperationKey] = []byte("ok1_k")
	p.Metadata[wire.MetadataEffectReference] = []byte("T-1")
	tr := oncekey.Label(converter.NewRawValue(p), nil)
	require.Equal(t, oncekey.OutcomeReplayed, tr.Status)
	require.True(t, tr.Replayed)
	require.Equal(t, "ok1_k", tr.OperationKey)
	require.Equal(t, "T-1", tr.EffectReference)
	require.JSONEq(t, `{"id":7}`, string(tr.Result.(json.RawMessage)))
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeReplayed, oncekey.NextNone, ""), tr.Text)

	p.Metadata[wire.MetadataOutcome] = []byte("applied")
	raw := converter.NewRawValue(p)
	tr = oncekey.Label(&raw, nil)
	require.Equal(t, oncekey.OutcomeApplied, tr.Status)
	require.False(t, tr.Replayed)
	require.Empty(t, tr.Reason)

	// Settled by reconciliation: applied, confirmed by the check, with its effect reference; not a
	// replay.
	p.Metadata[wire.MetadataReason] = []byte(oncekey.ReasonConfirmed)
	tr = oncekey.Label(converter.NewRawValue(p), nil)
	require.Equal(t, oncekey.OutcomeApplied, tr.Status)
	require.Equal(t, oncekey.ReasonConfirmed, tr.Reason)
	require.Equal(t, "T-1", tr.EffectReference)
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeApplied, oncekey.NextNone, oncekey.ReasonConfirmed), tr.Text)

	// No metadata (a tool without a policy): applied, no key.
	plain, err := converter.GetDefaultDataConverter().ToPayload("x")
	require.NoError(t, err)
	tr = oncekey.Label(converter.NewRawValue(plain), nil)
	require.Equal(t, oncekey.OutcomeApplied, tr.Status)
	require.Empty(t, tr.OperationKey)
	require.Equal(t, oncekey.ReasonNotRecorded, tr.Reason)
	require.NotContains(t, tr.Text, "Do not call it again", "a read is not told to stop calling")
	require.JSONEq(t, `"x"`, string(tr.Result.(json.RawMessage)))
}

// An error made in workflow code (the interceptor refusing to schedule a call, say) holds its
// details as Go values, not encoded: Label must read them without the SDK's reflect.Set panic
// for a destination of another type.
func TestLabelDetailsMadeInWorkflow(t *testing.T) {
	t.Parallel()
	const key = "ok1_0000000000000000000000000000000000000000000000000000000000000002"

	tr := oncekey.Label(nil, appErr(oncekey.ErrTypeConfig, true, details{OperationKey: key, Tool: "CreateTicket", Outcome: oncekey.OutcomeFailed}))
	require.Equal(t, oncekey.OutcomeFailed, tr.Status)
	require.Equal(t, oncekey.NextStop, tr.NextAction)
	require.Equal(t, key, tr.OperationKey)

	tr = oncekey.Label(nil, appErr(oncekey.ErrTypeResultTooLarge, true, details{OperationKey: key, Tool: "Lookup", Outcome: oncekey.OutcomeFailed}))
	require.Equal(t, oncekey.OutcomeFailed, tr.Status, "an oncekey.Idempotent tool's oversized result, read from Go-value details")
	require.True(t, tr.SafeToRepeat)

	tr = oncekey.Label(nil, appErr(oncekey.ErrTypeFingerprintMismatch, true, &details{OperationKey: key, Replay: true}))
	require.Equal(t, oncekey.OutcomeConflict, tr.Status)
	require.Equal(t, key, tr.OperationKey, "a pointer detail")
	require.True(t, tr.Replayed)

	// A nil detail (temporal.NewApplicationError(msg, typ, nil), a common idiom), wrapped or
	// not, reads as none.
	tr = oncekey.Label(nil, fmt.Errorf("step: %w", temporal.NewApplicationError("over budget", "agent.Budget", nil)))
	require.Equal(t, oncekey.OutcomeFailed, tr.Status)
	require.Empty(t, tr.OperationKey)
	tr = oncekey.Label(nil, appErr(oncekey.ErrTypeConfig, true, nil, nil))
	require.Equal(t, oncekey.OutcomeFailed, tr.Status)

	// Details of another shape read as none.
	tr = oncekey.Label(nil, appErr(oncekey.ErrTypeConfig, true, "not a struct", 42))
	require.Equal(t, oncekey.OutcomeFailed, tr.Status)
	require.Empty(t, tr.OperationKey)
}
