package worker_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/worker"
)

// Payment is the input of the Pay tool as the recorded histories' code had it.
type Payment struct {
	To     string `json:"to"`
	Amount int    `json:"amount"`
}

// payments is a fake downstream that counts the payments it makes.
type payments struct {
	mu   sync.Mutex
	made int
}

func (p *payments) Pay(ctx context.Context, in Payment) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.made++
	return fmt.Sprintf("paid %d to %s", in.Amount, in.To), nil
}

// Audit is an unprotected activity.
func Audit(ctx context.Context, s string) (string, error) { return "audited " + s, nil }

// PayWorkflow pays twice: once as a call (keyed by its arguments), once at a named step; then
// makes a third call at that step with other arguments, which fails as a fingerprint mismatch.
func PayWorkflow(ctx workflow.Context, in Payment) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(ctx, "Pay", in).Get(ctx, nil); err != nil {
		return err
	}
	step := oncekey.WithStepID(ctx, "refund-fee")
	if err := workflow.ExecuteActivity(step, "Pay", Payment{To: in.To, Amount: 1}).Get(ctx, nil); err != nil {
		return err
	}
	err := workflow.ExecuteActivity(step, "Pay", Payment{To: in.To, Amount: 2}).Get(ctx, nil)
	if tr := oncekey.Label(nil, err); tr.Status != oncekey.OutcomeConflict {
		return fmt.Errorf("want a fingerprint mismatch, got %v", err)
	}
	return nil
}

// AuditWorkflow calls no protected tool.
func AuditWorkflow(ctx workflow.Context, s string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	return workflow.ExecuteActivity(ctx, Audit, s).Get(ctx, nil)
}

// The new code's input types of Pay, one change each.
type (
	PaymentRenamed struct {
		To     string `json:"recipient"`
		Amount int    `json:"amount"`
	}
	PaymentAdded struct {
		To       string `json:"to"`
		Amount   int    `json:"amount"`
		Priority int    `json:"priority"`
	}
)

// PaymentRenamedCompat renames "to" to "recipient" and still decodes the older name.
type PaymentRenamedCompat struct {
	Recipient string `json:"recipient"`
	Amount    int    `json:"amount"`
}

func (p *PaymentRenamedCompat) UnmarshalJSON(b []byte) error {
	var both struct {
		Recipient string `json:"recipient"`
		To        string `json:"to"`
		Amount    int    `json:"amount"`
	}
	if err := json.Unmarshal(b, &both); err != nil {
		return err
	}
	p.Recipient, p.Amount = cmp.Or(both.Recipient, both.To), both.Amount
	return nil
}

// recordHistories runs PayWorkflow and AuditWorkflow on the dev server with oncekey (Pay at
// Version "1", in store) and writes their histories as `temporal workflow show --output json`
// does. It returns the Pay history's file and the Audit history's.
func recordHistories(t *testing.T, store oncekeystore.Store) (pay, audit string) {
	t.Helper()
	ctx := context.Background()
	p := &payments{}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(p.Pay, oncekey.Policy{Effect: oncekey.Effectful, Version: "1"}))
	plugin, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c := testenv.TemporalIn(t, "default", plugin)
	tq := "oncekey-identity-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(PayWorkflow)
	w.RegisterWorkflow(AuditWorkflow)
	w.RegisterActivity(p.Pay)
	w.RegisterActivity(Audit)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	dir := t.TempDir()
	write := func(id string, wf any, arg any) string {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, wf, arg)
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, nil))
		h, err := worker.FetchHistory(ctx, c, id, run.GetRunID())
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, worker.WriteHistory(&b, h))
		path := filepath.Join(dir, id+".json")
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		return path
	}
	suffix := fmt.Sprint(time.Now().UnixNano())
	pay = write("pay-"+suffix, PayWorkflow, Payment{To: "ann@example.com", Amount: 500})
	audit = write("audit-"+suffix, AuditWorkflow, "x")
	require.Equal(t, 2, p.made)
	return pay, audit
}

// payRegistry returns a Registry with Pay registered for the input type of fn under p.
func payRegistry(t *testing.T, fn any, p oncekey.Policy) *oncekey.Registry {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.SetAs("Pay", fn, p))
	return reg
}

// TestCheckIdentity records real histories on the dev server, then checks them against the new
// code's Registry after each kind of change: a renamed JSON tag, an added field and a Version
// bump are each reported with the field that made the difference; a no-op change and a bump
// with Previous pass.
func TestCheckIdentity(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	payFile, auditFile := recordHistories(t, store)
	v1 := oncekey.Policy{Effect: oncekey.Effectful, Version: "1"}
	orig := func(context.Context, Payment) (string, error) { return "", nil }

	check := func(t *testing.T, reg *oncekey.Registry, withStore bool) *worker.IdentityReport {
		t.Helper()
		opts := worker.IdentityOptions{}
		if withStore {
			opts.Store = store
		}
		rep, err := worker.CheckIdentityFiles(ctx, reg, opts, payFile)
		require.NoError(t, err)
		require.Len(t, rep.Results, 3, "the calls of Pay are found, the failed one too")
		var table bytes.Buffer
		require.NoError(t, rep.WriteTable(&table))
		t.Logf("\n%s", table.String())
		return rep
	}

	t.Run("no-op change passes", func(t *testing.T) {
		p := v1
		p.Description = "Pays someone."
		p.Lease = time.Minute
		rep := check(t, payRegistry(t, orig, p), true)
		require.NoError(t, rep.Err())
		for _, r := range rep.Results {
			require.Equal(t, worker.IdentitySame, r.Status, r.Note)
			require.NotEmpty(t, r.Key, "the key is read from the history")
		}
	})

	t.Run("renamed JSON tag", func(t *testing.T) {
		rep := check(t, payRegistry(t, func(context.Context, PaymentRenamed) (string, error) { return "", nil }, v1), true)
		var changed *worker.IdentityChangedError
		require.ErrorAs(t, rep.Err(), &changed)
		require.Len(t, changed.Changed, 3, "the call's key and the step's fingerprints change")
		for _, r := range changed.Changed {
			require.Equal(t, "Pay", r.Tool)
			require.Equal(t, "recipient", r.Field)
			require.Equal(t, "absent", r.Was)
			require.Contains(t, r.Note, "to")
		}
		require.Contains(t, changed.Error(), "Pay")
	})

	t.Run("added field", func(t *testing.T) {
		rep := check(t, payRegistry(t, func(context.Context, PaymentAdded) (string, error) { return "", nil }, v1), false)
		ch := rep.Changed()
		require.Len(t, ch, 3, "the call's key changes, and the step's fingerprints (its key holds no arguments)")
		for _, r := range ch {
			require.Equal(t, "priority", r.Field)
			require.Equal(t, "absent", r.Was)
			require.Equal(t, "0", r.Now)
		}
	})

	t.Run("version bump", func(t *testing.T) {
		p := v1
		p.Version = "2"
		rep := check(t, payRegistry(t, orig, p), false)
		ch := rep.Changed()
		require.Len(t, ch, 3, "the history records the version of each call, the failed one's in its details")
		for _, r := range ch {
			require.Equal(t, "Version", r.Field)
			require.Equal(t, `"1"`, r.Was)
			require.Equal(t, `"2"`, r.Now)
		}
		var table bytes.Buffer
		require.NoError(t, rep.WriteTable(&table))
		require.Contains(t, table.String(), "3 changed")
	})

	// A history that does not record fingerprints (one from before oncekey recorded them):
	// the store's records give them, and without a store only keys are compared.
	t.Run("version bump, fingerprints from the store", func(t *testing.T) {
		h, err := worker.ReadHistoryFile(payFile)
		require.NoError(t, err)
		for _, ev := range h.History.GetEvents() {
			for _, pl := range ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads() {
				delete(pl.Metadata, wire.MetadataFingerprint)
				delete(pl.Metadata, wire.MetadataVersion)
			}
			if info := ev.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo(); info != nil {
				info.Details = nil // the failed call's key goes with them: unverified
			}
		}
		p := v1
		p.Version = "2"
		reg := payRegistry(t, orig, p)
		rep, err := worker.CheckIdentity(ctx, reg, worker.IdentityOptions{Store: store}, h)
		require.NoError(t, err)
		require.Len(t, rep.Changed(), 2)
		require.Equal(t, "Version", rep.Changed()[0].Field)
		require.Equal(t, worker.IdentityUnverified, rep.Results[2].Status)
		rep, err = worker.CheckIdentity(ctx, reg, worker.IdentityOptions{}, h)
		require.NoError(t, err)
		require.NoError(t, rep.Err(), "keys alone do not show a Version")
		require.Contains(t, rep.Results[0].Note, "key compared only")
	})

	t.Run("version bump with previous passes", func(t *testing.T) {
		p := v1
		p.Version = "2"
		p.Previous = []oncekey.PreviousVersion{{Version: "1"}}
		require.NoError(t, check(t, payRegistry(t, orig, p), true).Err())
	})

	// A renamed tag needs both halves: the input type still decodes the older name (a call
	// scheduled by the older code arrives with it), and Previous maps the document back.
	t.Run("renamed tag with a mapping", func(t *testing.T) {
		p := v1
		p.Previous = []oncekey.PreviousVersion{{Version: "1", Args: func(args json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(strings.Replace(string(args), `"recipient"`, `"to"`, 1)), nil
		}}}
		rep := check(t, payRegistry(t, func(context.Context, PaymentRenamed) (string, error) { return "", nil }, p), true)
		require.Len(t, rep.Changed(), 3, "the recorded input no longer decodes into the same values: a mapping cannot bring them back")
		require.NoError(t, check(t, payRegistry(t, func(context.Context, PaymentRenamedCompat) (string, error) { return "", nil }, p), true).Err())
	})

	t.Run("tool no longer protected", func(t *testing.T) {
		rep := check(t, payRegistry(t, orig, oncekey.Policy{Effect: oncekey.ReadOnly}), false)
		ch := rep.Changed()
		require.Len(t, ch, 3)
		require.Equal(t, "policy", ch[0].Field)
	})

	t.Run("bad input", func(t *testing.T) {
		reg := payRegistry(t, orig, v1)
		whole, err := os.ReadFile(payFile)
		require.NoError(t, err)
		dir := t.TempDir()
		file := func(name string, b []byte) string {
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, b, 0o644))
			return p
		}
		for _, tc := range []struct {
			name, path, want string
		}{
			{"not JSON", file("notjson.json", []byte("Workflow Id: pay-1\nRun Id: x\n")), "is not JSON"},
			{"truncated", file("truncated.json", whole[:len(whole)/2]), "is not JSON (cut off"},
			{"empty", file("empty.json", nil), "is empty"},
			{"another document", file("other.json", []byte(`{"workflowId":"pay-1"}`)), "has no events"},
			{"no oncekey activity", auditFile, "holds no call of a protected tool"},
			{"missing", filepath.Join(dir, "nope.json"), "cannot be opened"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rep, err := worker.CheckIdentityFiles(ctx, reg, worker.IdentityOptions{}, payFile, tc.path)
				require.Nil(t, rep, "no report, never a silent pass")
				var he *worker.HistoryError
				require.True(t, errors.As(err, &he), "%v", err)
				require.Equal(t, tc.path, he.Name)
				require.Contains(t, err.Error(), tc.want)
			})
		}
		_, err = worker.CheckIdentity(ctx, reg, worker.IdentityOptions{})
		require.ErrorContains(t, err, "no histories given")
	})
}
