package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// The Transactional class end to end, on Postgres and a dev server. The effect is a row in
// credit_ledger, written by the body in oncekey's transaction; every test counts those rows.

type CreditRequest struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

type CreditReceipt struct {
	Entry int64 `json:"entry"`
}

// credits is the Transactional tool. fault, when set, runs after the body's INSERT (and its
// outbox message, unless noOutbox) with the attempt number and may return the body's error.
type credits struct {
	bodies   atomic.Int32
	pid      atomic.Uint32 // the backend of the last body's transaction
	fault    func(ctx context.Context, attempt int32) error
	noOutbox bool
}

func (c *credits) AddCredit(ctx context.Context, in CreditRequest) (CreditReceipt, error) {
	c.bodies.Add(1)
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return CreditReceipt{}, err
	}
	c.pid.Store(tx.Conn().PgConn().PID())
	key, _ := oncekey.OperationKey(ctx)
	var out CreditReceipt
	if err := tx.QueryRow(ctx, `INSERT INTO credit_ledger (op_key, account, amount) VALUES ($1, $2, $3) RETURNING entry`,
		key, in.Account, in.Amount).Scan(&out.Entry); err != nil {
		return CreditReceipt{}, err
	}
	if !c.noOutbox {
		if err := pgstore.Enqueue(ctx, "receipt", []byte(in.Account)); err != nil {
			return CreditReceipt{}, err
		}
	}
	if c.fault != nil {
		if err := c.fault(ctx, activityAttempt(ctx)); err != nil {
			return CreditReceipt{}, err
		}
	}
	return out, nil
}

func activityAttempt(ctx context.Context) int32 { return activity.GetInfo(ctx).Attempt }

// CreditWorkflow makes calls AddCredit calls at one step ID, one after another or all at once.
func CreditWorkflow(ctx workflow.Context, in CreditRequest, calls int, parallel bool) ([]CreditReceipt, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 3 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumInterval: time.Second, MaximumAttempts: 10},
	})
	ctx = oncekey.WithStepID(ctx, "credit")
	out := make([]CreditReceipt, calls)
	futures := make([]workflow.Future, calls)
	for i := range calls {
		futures[i] = workflow.ExecuteActivity(ctx, "AddCredit", in)
		if !parallel {
			if err := futures[i].Get(ctx, &out[i]); err != nil {
				return nil, err
			}
		}
	}
	for i := range calls {
		if err := futures[i].Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type txEnv struct {
	pool    *pgxpool.Pool
	store   *pgstore.Store
	c       client.Client
	tq      string
	credits *credits
	events  chan worker.Event
}

// setupTx starts a worker running AddCredit as Transactional over wrap(store) (nil: the store).
func setupTx(t *testing.T, cr *credits, p oncekey.Policy, wrap func(*pgstore.Store, *pgxpool.Pool) oncekeystore.Store) *txEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	_, err := pool.Exec(context.Background(), `CREATE TABLE credit_ledger (entry bigserial PRIMARY KEY, op_key text NOT NULL,
    account text NOT NULL, amount bigint NOT NULL)`)
	require.NoError(t, err)
	e := &txEnv{pool: pool, store: pgstore.New(pool, nil), credits: cr, events: make(chan worker.Event, 64)}
	var store oncekeystore.Store = e.store
	if wrap != nil {
		store = wrap(e.store, pool)
	}
	p.Effect = oncekey.Transactional
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(cr.AddCredit, p))
	plugin, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg, OnEvent: func(ev worker.Event) { e.events <- ev }})
	require.NoError(t, err)
	e.c, err = client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(e.c.Close)
	e.tq = "oncekey-tx-" + t.Name()
	w := sdkworker.New(e.c, e.tq, sdkworker.Options{})
	w.RegisterWorkflow(CreditWorkflow)
	w.RegisterWorkflow(LabelledCreditWorkflow)
	w.RegisterActivity(cr.AddCredit)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return e
}

func (e *txEnv) run(t *testing.T, calls int, parallel bool) ([]CreditReceipt, error) {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "tx-" + t.Name(), TaskQueue: e.tq,
		WorkflowExecutionTimeout: 2 * time.Minute}, CreditWorkflow, CreditRequest{Account: "acme", Amount: 10}, calls, parallel)
	require.NoError(t, err)
	var out []CreditReceipt
	err = run.Get(testCtx(t), &out)
	return out, err
}

// effects counts the rows the bodies committed.
func (e *txEnv) effects(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM credit_ledger`).Scan(&n))
	return n
}

func (e *txEnv) record(t *testing.T) *oncekeystore.Record {
	t.Helper()
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	return res.Records[0]
}

func TestTransactionalRepeatsReplay(t *testing.T) {
	e := setupTx(t, &credits{}, oncekey.Policy{}, nil)
	out, err := e.run(t, 3, false)
	require.NoError(t, err)
	require.Equal(t, 1, e.effects(t))
	require.Equal(t, int32(1), e.credits.bodies.Load())
	require.Equal(t, out[0], out[1])
	require.Equal(t, out[0], out[2])
	require.Equal(t, oncekeystore.StatusApplied, e.record(t).Status)
}

func TestTransactionalConcurrentAttemptsWriteOnce(t *testing.T) {
	e := setupTx(t, &credits{}, oncekey.Policy{}, nil)
	out, err := e.run(t, 4, true)
	require.NoError(t, err)
	require.Equal(t, 1, e.effects(t))
	for _, r := range out {
		require.Equal(t, out[0], r)
	}
}

// The body writes, then fails: the write rolls back, the claim is given back, and Temporal's
// retry writes once.
func TestTransactionalBodyErrorRollsBack(t *testing.T) {
	cr := &credits{fault: func(_ context.Context, attempt int32) error {
		if attempt == 1 {
			return errors.New("the rate service did not answer")
		}
		return nil
	}}
	e := setupTx(t, cr, oncekey.Policy{}, nil)
	_, err := e.run(t, 1, false)
	require.NoError(t, err)
	require.Equal(t, int32(2), cr.bodies.Load())
	require.Equal(t, 1, e.effects(t))
	// The failed attempt's message rolled back with its row: one message, delivered once.
	var keys []string
	res, err := e.store.RelayOnce(testCtx(t), func(_ context.Context, m *pgstore.OutboxMessage) error {
		keys = append(keys, m.IdempotencyKey())
		return nil
	}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.Equal(t, []string{pgstore.OutboxIdempotencyKey(e.record(t).Tenant, e.record(t).OperationKey, "receipt")}, keys)
}

// A body that outlives its attempt (it ignores its context): the retry takes the record over
// once the lease runs out and writes once; the first body's writes roll back (the server ends
// its idle transaction, and its completion at the stale epoch would match no row).
func TestTransactionalZombieRollsBack(t *testing.T) {
	unblock := make(chan struct{})
	cr := &credits{fault: func(_ context.Context, attempt int32) error {
		if attempt == 1 {
			<-unblock
		}
		return nil
	}}
	e := setupTx(t, cr, oncekey.Policy{Lease: time.Second}, nil)
	_, err := e.run(t, 1, false)
	close(unblock)
	require.NoError(t, err)
	// Both attempts report: the retry applied, the zombie did not.
	var outcomes []oncekey.Outcome
	for len(outcomes) < 2 {
		select {
		case ev := <-e.events:
			outcomes = append(outcomes, ev.Outcome)
		case <-testCtx(t).Done():
			t.Fatalf("the zombie attempt never ended: %v", outcomes)
		}
	}
	require.ElementsMatch(t, []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeFailed}, outcomes)
	require.Equal(t, int32(2), cr.bodies.Load())
	require.Equal(t, 1, e.effects(t))
	rec := e.record(t)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, int64(2), rec.Epoch)
}

// faultyCommit wraps the store's transactions so that the first commit meets a fault at an
// exact point: "terminate" ends the transaction's backend just before COMMIT (as a Postgres
// restart during the commit does); "lost" commits and then reports the connection lost, as if
// COMMIT's answer never arrived.
type faultyCommit struct {
	*pgstore.Store
	pool  *pgxpool.Pool
	cr    *credits
	mode  string
	fired atomic.Bool
}

func (f *faultyCommit) BeginTx(ctx context.Context, p *oncekeystore.BeginTxParams) (oncekeystore.StoreTx, error) {
	tx, err := f.Store.BeginTx(ctx, p)
	if err != nil {
		return nil, err
	}
	return &faultyTx{StoreTx: tx, f: f}, nil
}

type faultyTx struct {
	oncekeystore.StoreTx
	f *faultyCommit
}

func (t *faultyTx) Commit(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	if !t.f.fired.CompareAndSwap(false, true) {
		return t.StoreTx.Commit(ctx, p)
	}
	switch t.f.mode {
	case "terminate":
		if _, err := t.f.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, t.f.cr.pid.Load()); err != nil {
			return nil, err
		}
		return t.StoreTx.Commit(ctx, p)
	default:
		if _, err := t.StoreTx.Commit(ctx, p); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("pgstore: commit %s: connection reset by peer (the fault)", p.OperationKey)
	}
}

func TestTransactionalCommitOutcomeReadBack(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		bodies int32
	}{
		{"terminate", 2}, // not committed: read back as pending, released, the retry writes once
		{"lost", 1},      // committed: read back as applied at the epoch, answered applied
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cr := &credits{}
			e := setupTx(t, cr, oncekey.Policy{}, func(s *pgstore.Store, pool *pgxpool.Pool) oncekeystore.Store {
				return &faultyCommit{Store: s, pool: pool, cr: cr, mode: tc.mode}
			})
			out, err := e.run(t, 2, false)
			require.NoError(t, err)
			require.Equal(t, tc.bodies, cr.bodies.Load())
			require.Equal(t, 1, e.effects(t))
			require.Equal(t, out[0], out[1], "the repeat did not replay the committed result")
			require.Equal(t, oncekeystore.StatusApplied, e.record(t).Status)
		})
	}
}

// A body that commits the transaction itself: refused (TxMisuse, not retried), nothing written,
// the claim given back.
func TestTransactionalBodyCommitRefused(t *testing.T) {
	var refused error
	var mu sync.Mutex
	cr := &credits{fault: func(ctx context.Context, _ int32) error {
		tx, _ := pgstore.Tx(ctx)
		mu.Lock()
		refused = tx.Commit(ctx)
		mu.Unlock()
		return nil // ignores the refusal
	}}
	e := setupTx(t, cr, oncekey.Policy{}, nil)
	_, err := e.run(t, 1, false)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeTxMisuse, appErr.Type())
	mu.Lock()
	var misuse *oncekeystore.TxMisuseError
	require.ErrorAs(t, refused, &misuse)
	mu.Unlock()
	require.Equal(t, int32(1), cr.bodies.Load(), "a misuse was retried")
	require.Equal(t, 0, e.effects(t))
	require.Equal(t, oncekeystore.StatusReleased, e.record(t).Status)
}

// A body that ends its transaction through SQL and then fails: before, the statement committed
// the first attempt's row at once, the rollback undid nothing, the claim was given back and the
// retry wrote the row again (two rows). Through pgstore.Tx the statement is refused with a
// TxMisuseError and not run, the first attempt's row rolls back with its failure, and the retry
// writes once. Through Conn (which bypasses the checks) the row the statement committed cannot be
// undone, but the ended transaction is found: the call fails, not retryable, and the record keeps
// the failure, so nothing writes the row again.
func TestTransactionalBodyEndingItsTransaction(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		conn      bool
		rows      int
		bodies    int32
		status    oncekeystore.Status
	}{
		{name: "COMMIT", sql: "COMMIT", rows: 1, bodies: 2, status: oncekeystore.StatusApplied},
		{name: "END", sql: "END", rows: 1, bodies: 2, status: oncekeystore.StatusApplied},
		{name: "commit; begin", sql: "commit; begin", rows: 1, bodies: 2, status: oncekeystore.StatusApplied},
		{name: "Conn COMMIT", sql: "COMMIT", conn: true, rows: 1, bodies: 1, status: oncekeystore.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var refused error
			cr := &credits{noOutbox: true, fault: func(ctx context.Context, attempt int32) error {
				if attempt > 1 {
					return nil
				}
				tx, _ := pgstore.Tx(ctx)
				var err error
				if tc.conn {
					_, err = tx.Conn().Exec(ctx, tc.sql)
				} else {
					_, err = tx.Exec(ctx, tc.sql)
				}
				mu.Lock()
				refused = err
				mu.Unlock()
				return errors.New("the rate service did not answer") // ignores the refusal, then fails
			}}
			e := setupTx(t, cr, oncekey.Policy{}, nil)
			_, err := e.run(t, 1, false)
			require.Equal(t, tc.rows, e.effects(t), "rows written")
			mu.Lock()
			defer mu.Unlock()
			if tc.conn {
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr)
				require.Equal(t, oncekey.ErrTypeTxMisuse, appErr.Type())
				require.NoError(t, refused)
			} else {
				require.NoError(t, err)
				var misuse *oncekeystore.TxMisuseError
				require.ErrorAs(t, refused, &misuse)
			}
			require.Equal(t, tc.bodies, cr.bodies.Load())
			require.Equal(t, tc.status, e.record(t).Status)
		})
	}
}

// A Transactional tool may ask for approval like the other claimed classes: nothing runs while
// the approval waits; approved, the body runs once and its row commits with the record.
func TestTransactionalWithApproval(t *testing.T) {
	cr := &credits{}
	e := setupTx(t, cr, oncekey.Policy{Approval: &oncekey.ApprovalPolicy{}}, nil)
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "tx-" + t.Name(), TaskQueue: e.tq,
		WorkflowExecutionTimeout: 2 * time.Minute}, CreditWorkflow, CreditRequest{Account: "acme", Amount: 10}, 1, false)
	require.NoError(t, err)
	var a *oncekeystore.Approval
	require.Eventually(t, func() bool {
		res, err := e.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		if err != nil || len(res.Approvals) != 1 {
			return false
		}
		a = res.Approvals[0]
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 30*time.Second, 100*time.Millisecond, "no approval came to wait for a person")
	require.Equal(t, "AddCredit", a.Tool)
	require.Equal(t, int32(0), cr.bodies.Load(), "the body ran before the approval")
	require.Equal(t, 0, e.effects(t))

	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: a.Tenant, DecidedBy: "alice"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	var got []CreditReceipt
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Len(t, got, 1)
	require.Equal(t, int32(1), cr.bodies.Load())
	require.Equal(t, 1, e.effects(t))
	require.Equal(t, oncekeystore.StatusApplied, e.record(t).Status)
}

// memstore (like redisstore, tested in its module) cannot commit a tool's writes with its
// record: a Transactional tool over it is refused when the worker is set up.
func TestTransactionalRefusedOnMemstore(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set((&credits{}).AddCredit, oncekey.Policy{Effect: oncekey.Transactional}))
	_, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg})
	var refused *oncekeystore.TransactionalStoreError
	require.ErrorAs(t, err, &refused)
	require.ErrorIs(t, err, worker.ErrConfig)
	require.Contains(t, err.Error(), "use pgstore")
}

// failingWrites is the store with Complete (and MarkUnknown, when markUnknown) failing as an
// unreachable store does.
type failingWrites struct {
	*pgstore.Store
	markUnknown bool
}

func (f *failingWrites) Complete(context.Context, *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	return nil, &oncekeystore.StoreUnavailableError{Op: "complete", Err: errors.New("connection refused (the fault)")}
}

func (f *failingWrites) MarkUnknown(ctx context.Context, p *oncekeystore.MarkUnknownParams) (*oncekeystore.Record, error) {
	if f.markUnknown {
		return nil, &oncekeystore.StoreUnavailableError{Op: "mark unknown", Err: errors.New("connection refused (the fault)")}
	}
	return f.Store.MarkUnknown(ctx, p)
}

// A body that ended its transaction through Conn, on a store that cannot record the failure: the
// record is marked unknown at the epoch, never released, so no repeat runs the body over the row
// it committed. Before, the failed write fell back to a release, and the repeat (a second run of
// the workflow, same key) ran the body again: two rows. When marking it unknown fails too, the
// record stays pending (its lease runs out, and the next claim of the key takes it over).
func TestTransactionalEndedFailureNotRecorded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		markUnknown bool
		status      oncekeystore.Status
	}{
		{"unknown", false, oncekeystore.StatusUnknown},
		{"pending", true, oncekeystore.StatusPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &credits{noOutbox: true, fault: func(ctx context.Context, _ int32) error {
				tx, _ := pgstore.Tx(ctx)
				_, err := tx.Conn().Exec(ctx, "COMMIT")
				return err
			}}
			e := setupTx(t, cr, oncekey.Policy{}, func(s *pgstore.Store, _ *pgxpool.Pool) oncekeystore.Store {
				return &failingWrites{Store: s, markUnknown: tc.markUnknown}
			})
			_, err := e.run(t, 1, false)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, oncekey.ErrTypeTxMisuse, appErr.Type())
			require.Equal(t, int32(1), cr.bodies.Load())
			require.Equal(t, 1, e.effects(t), "the row the body committed itself")
			rec := e.record(t)
			require.Equal(t, tc.status, rec.Status)
			if tc.status == oncekeystore.StatusUnknown {
				// A repeat of the call does not run the body again.
				_, err = e.run(t, 1, false)
				require.Error(t, err)
				require.Equal(t, int32(1), cr.bodies.Load(), "the body ran again")
				require.Equal(t, 1, e.effects(t))
			}
		})
	}
}
