package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// The harness both halves of the suite (records and approvals) share: bounded contexts, fresh
// keys, whole listings, field-by-field comparison, and racing calls.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%x", "ok1_", b)
}

// pages reads every page of a listing (List or ListApprovals: list) with the filters of p, from
// p's cursor (cursor points at it) on; page returns a result's items and next cursor.
// It returns the pages, in order.
func pages[P, R, T any](t *testing.T, list func(context.Context, *P) (*R, error), p P, cursor func(*P) *string, page func(*R) ([]T, string)) [][]T {
	t.Helper()
	var out [][]T
	for n := 0; ; n++ {
		require.Less(t, n, 1000)
		res, err := list(ctxT(t), &p)
		require.NoError(t, err)
		items, next := page(res)
		out = append(out, items)
		if next == "" {
			return out
		}
		*cursor(&p) = next
	}
}

// The cursor and the page of List and ListApprovals, for pages.
func listCursor(p *oncekeystore.ListParams) *string                        { return &p.Cursor }
func listPage(r *oncekeystore.ListResult) ([]*oncekeystore.Record, string) { return r.Records, r.Next }
func approvalCursor(p *oncekeystore.ListApprovalsParams) *string           { return &p.Cursor }
func approvalPage(r *oncekeystore.ListApprovalsResult) ([]*oncekeystore.Approval, string) {
	return r.Approvals, r.Next
}

// requirePaged asserts a listing came in at least atLeast pages of at most limit items each,
// and returns the items.
func requirePaged[T any](t *testing.T, byPage [][]T, limit, atLeast int) []T {
	t.Helper()
	require.GreaterOrEqual(t, len(byPage), atLeast)
	for _, pg := range byPage {
		require.LessOrEqual(t, len(pg), limit)
	}
	return slices.Concat(byPage...)
}

// requireDefaultPages asserts that a listing (list) of all n items, DefaultListLimit < n <=
// 2*DefaultListLimit, comes without a Limit in a page of DefaultListLimit and one of the rest.
func requireDefaultPages[P, R, T any](t *testing.T, list func(context.Context, *P) (*R, error), cursor func(*P) *string, page func(*R) ([]T, string), n int) {
	t.Helper()
	var p P
	byPage := pages(t, list, p, cursor, page)
	require.Len(t, byPage, 2)
	require.Len(t, byPage[0], oncekeystore.DefaultListLimit)
	require.Len(t, byPage[1], n-oncekeystore.DefaultListLimit)
}

// requireListInvalid asserts list refuses a Limit (limit points at it) over MaxListLimit or
// negative, and a cursor (cursor points at it) no store issued, with *oncekeystore.InvalidParamsError.
func requireListInvalid[P, R any](t *testing.T, list func(context.Context, *P) (R, error), limit func(*P) *int, cursor func(*P) *string) {
	t.Helper()
	for field, set := range map[string]func(p *P){
		"Limit":  func(p *P) { *limit(p) = oncekeystore.MaxListLimit + 1 },
		"Cursor": func(p *P) { *cursor(p) = "not a cursor!" },
	} {
		var p P
		set(&p)
		_, err := list(ctxT(t), &p)
		requireInvalid(t, err, field)
	}
	var p P
	*limit(&p) = -1
	_, err := list(ctxT(t), &p)
	requireInvalid(t, err, "Limit")
}

// badTexts are text fields (by name) of ClaimParams and RequestApprovalParams with a value each
// refuses: a required one blank, another not UTF-8 or with a NUL. setField sets them.
var badTexts = map[string]string{
	"Tenant": " ", "OperationKey": "", "Fingerprint": "", "Namespace": "bad\x00ns", "Tool": "bad\x00tool", "WorkflowID": "bad\xffutf8",
}

// setField sets the field name of the struct p points at to v.
func setField(p any, name string, v any) {
	reflect.ValueOf(p).Elem().FieldByName(name).Set(reflect.ValueOf(v))
}

// requireRefusedTexts asserts call refuses p with each of badTexts (fresh makes p) with
// *oncekeystore.InvalidParamsError naming the field, and that the refused call stored nothing
// (stored reads it back).
func requireRefusedTexts[P any](t *testing.T, fresh func() *P, call func(p *P) error, stored func(p *P) error) {
	t.Helper()
	for field, v := range badTexts {
		p := fresh()
		setField(p, field, v)
		requireInvalid(t, call(p), field)
		if key := reflect.ValueOf(p).Elem().FieldByName("OperationKey").String(); key != "" && field != "Tenant" {
			require.ErrorIs(t, stored(p), oncekeystore.ErrNotFound, "a refused call stores nothing")
		}
	}
}

// purgeUntil purges s in batches of batch until done says the running totals are all it waits
// for, and returns them.
func purgeUntil(t *testing.T, s oncekeystore.Store, batch int, done func(total oncekeystore.PurgeResult) bool) oncekeystore.PurgeResult {
	t.Helper()
	var total oncekeystore.PurgeResult
	require.Eventually(t, func() bool {
		res, err := s.Purge(context.Background(), &oncekeystore.PurgeParams{BatchSize: batch})
		require.NoError(t, err)
		total.Tombstoned += res.Tombstoned
		total.Deleted += res.Deleted
		total.ApprovalsDeleted += res.ApprovalsDeleted
		total.GrantsDeleted += res.GrantsDeleted
		return done(total)
	}, waitFor, pollEvery, "purge never finished: %+v", total)
	return total
}

// requireForgotten asserts the tenant has nothing left in s: no record listed (and no
// approval, in an ApprovalStore; no grant, in a GrantStore), and forgetting it again deletes nothing.
func requireForgotten(t *testing.T, s oncekeystore.Store, tenant string) {
	t.Helper()
	require.Empty(t, slices.Concat(pages(t, s.List, oncekeystore.ListParams{Tenant: tenant}, listCursor, listPage)...))
	if as, ok := s.(oncekeystore.ApprovalStore); ok {
		require.Empty(t, slices.Concat(pages(t, as.ListApprovals, oncekeystore.ListApprovalsParams{Tenant: tenant}, approvalCursor, approvalPage)...))
	}
	if gs, ok := s.(oncekeystore.GrantStore); ok {
		require.Empty(t, do(t, gs.ListGrants, &oncekeystore.ListGrantsParams{Tenant: tenant}).Grants)
	}
	res, err := s.Forget(ctxT(t), &oncekeystore.ForgetParams{Tenant: tenant})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ForgetResult{}, *res)
}

// raceOne calls call from n goroutines at once (race) and requires no error, exactly one
// answer that won says won, and every other answer fine by other (a problem, or nil). It
// returns the winner.
func raceOne[T any](t *testing.T, n int, call func(i int) (T, error), won func(T) bool, other func(T) error) T {
	t.Helper()
	var (
		winners []T
		errs    []error
	)
	race(n, call, func(v T, err error) {
		switch {
		case err != nil:
			errs = append(errs, err)
		case won(v):
			winners = append(winners, v)
		default:
			if err := other(v); err != nil {
				errs = append(errs, err)
			}
		}
	})
	require.Empty(t, errs)
	require.Len(t, winners, 1, "exactly one of %d concurrent calls wins", n)
	return winners[0]
}

// do calls fn (a store method) with a context bounded for the test and p, and requires no
// error.
func do[P, R any](t *testing.T, fn func(context.Context, P) (R, error), p P) R {
	t.Helper()
	r, err := fn(ctxT(t), p)
	require.NoError(t, err)
	return r
}

// requireSameFields asserts two reads (two *oncekeystore.Record or two *oncekeystore.Approval) are equal in
// every field but those named in skip: times by time.Time.Equal (stores read them in other
// locations), byte slices exactly (requireBytes), the rest by require.Equal.
func requireSameFields(t *testing.T, want, got any, skip ...string) {
	t.Helper()
	w, g := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := range w.NumField() {
		name := w.Type().Field(i).Name
		if slices.Contains(skip, name) {
			continue
		}
		switch wv, gv := w.Field(i).Interface(), g.Field(i).Interface(); wv := wv.(type) {
		case time.Time:
			require.True(t, wv.Equal(gv.(time.Time)), "%s: want %s, got %s", name, wv, gv)
		case []byte:
			requireBytes(t, wv, gv.([]byte), name)
		default:
			require.Equal(t, wv, gv, name)
		}
	}
}

// requireBytes asserts exact equality, including nil versus empty.
func requireBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	require.Equal(t, want == nil, got == nil, "%s: nil-ness differs (want nil=%v, got nil=%v)", what, want == nil, got == nil)
	require.True(t, bytes.Equal(want, got), "%s: bytes differ (want %d bytes, got %d)", what, len(want), len(got))
}

func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var ie *oncekeystore.InvalidParamsError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, field, ie.Field)
}

// race calls call(i) for i in [0, n) from n goroutines released at the same moment, hands each
// answer to tally (one at a time, so tally needs no lock) and returns once all have answered.
func race[T any](n int, call func(i int) (T, error), tally func(T, error)) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := call(i)
			mu.Lock()
			defer mu.Unlock()
			tally(res, err)
		}()
	}
	close(start)
	wg.Wait()
}

// filter is what a list filter test lists by: status, tenant, tool, workflow ID ("": any).
type filter struct{ status, tenant, tool, wf string }

// requireListFilters makes the items of a list filter test, seven of them: mk makes the i-th
// with a tenant, tool and workflow ID and leaves it in the test's i-th status, returning its
// "tenant/key" and status. Then it checks that list (which lists by a filter, checks the order
// and returns the keys) lists exactly the items each of a set of filters keeps.
func requireListFilters(t *testing.T, mk func(i int, tenant, tool, wf string) (key, status string), list func(f filter) []string) {
	t.Helper()
	var made []filter
	var keys []string
	for i, m := range []filter{
		{tenant: "acme", tool: "create_ticket", wf: "wf-1"}, {tenant: "acme", tool: "create_ticket", wf: "wf-2"},
		{tenant: "acme", tool: "send_email", wf: "wf-1"}, {tenant: "globex", tool: "create_ticket", wf: "wf-1"},
		{tenant: "globex", tool: "refund", wf: "wf-3"}, {tenant: "globex", tool: "refund", wf: "wf-3"},
		{tenant: "acme", tool: "refund", wf: "wf-4"},
	} {
		key, st := mk(i, m.tenant, m.tool, m.wf)
		m.status = st
		made = append(made, m)
		keys = append(keys, key)
	}
	// By the status of the first item (several have it) and of the sixth (one has it).
	for _, f := range []filter{
		{}, {status: made[0].status}, {status: made[0].status, tenant: "acme"}, {status: made[5].status},
		{tool: "refund"}, {tool: "create_ticket", wf: "wf-1"}, {tenant: "initech"},
	} {
		var want []string
		for i, m := range made {
			if (f.status == "" || m.status == f.status) && (f.tenant == "" || m.tenant == f.tenant) &&
				(f.tool == "" || m.tool == f.tool) && (f.wf == "" || m.wf == f.wf) {
				want = append(want, keys[i])
			}
		}
		require.ElementsMatch(t, want, list(f), "filter %+v", f)
	}
}
