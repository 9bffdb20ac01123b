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

	"github.com/oncekey/oncekey"
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
	return fmt.Sprintf("%s%x", oncekey.KeyPrefix, b)
}

// pages reads every page of a listing (List or ListApprovals: list) with the filters of p, from
// p's cursor (cursor points at it) on; page returns a result's items and next cursor.
func pages[P, R, T any](t *testing.T, list func(context.Context, *P) (*R, error), p P, cursor func(*P) *string, page func(*R) ([]T, string)) []T {
	t.Helper()
	var out []T
	for n := 0; ; n++ {
		require.Less(t, n, 1000)
		res, err := list(ctxT(t), &p)
		require.NoError(t, err)
		items, next := page(res)
		out = append(out, items...)
		if next == "" {
			return out
		}
		*cursor(&p) = next
	}
}

// requireSameFields asserts two reads (two *oncekey.Record or two *oncekey.Approval) are equal in
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
	var ie *oncekey.InvalidParamsError
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
