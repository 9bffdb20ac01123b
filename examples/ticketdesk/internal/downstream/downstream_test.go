package downstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func start(t *testing.T, f Faults) *Set {
	t.Helper()
	s, err := Start(f, []Customer{{ID: "C-1", Name: "Ada", Email: "ada@example.com", RefundsAllowed: true}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// identityWith finds a business identity whose first attempt at service meets fault f and whose
// second attempt is served normally.
// suffix is appended to the candidate to form the identity the service derives.
func identityWith(t *testing.T, fs Faults, service, suffix string, f Fault) string {
	t.Helper()
	for i := range 10000 {
		id := fmt.Sprintf("REQ-%d", i)
		if fs.For(service, id+suffix, 1) == f && fs.For(service, id+suffix, 2) == FaultNone {
			return id
		}
	}
	t.Fatalf("no identity meets %s", f)
	return ""
}

func TestFaultScheduleDeterministic(t *testing.T) {
	a, b := DefaultFaults(7), DefaultFaults(7)
	counts := map[Fault]int{}
	for i := range 2000 {
		id := fmt.Sprintf("REQ-%d", i)
		f := a.For(ServiceTickets, id, 1)
		require.Equal(t, f, b.For(ServiceTickets, id, 1))
		counts[f]++
		require.Equal(t, FaultNone, a.For(ServiceTickets, id, 3), "attempts past FaultyAttempts are always served")
	}
	// 20% / 12% / 10% of 2000, within a generous band: every kind really occurs.
	require.InDelta(t, 400, counts[FaultLostAfterCommit], 100)
	require.InDelta(t, 240, counts[FaultErrorBeforeCommit], 80)
	require.InDelta(t, 200, counts[FaultDelay], 80)
	other, differ := DefaultFaults(8), 0
	for i := range 200 {
		id := fmt.Sprintf("REQ-%d", i)
		if other.For(ServiceTickets, id, 1) != a.For(ServiceTickets, id, 1) {
			differ++
		}
	}
	require.Greater(t, differ, 20, "another seed gives another schedule")
}

func TestLostAfterCommitLandsTheEffect(t *testing.T) {
	fs := DefaultFaults(1)
	s := start(t, fs)
	id := identityWith(t, fs, ServiceTickets, "", FaultLostAfterCommit)
	c := NewClient(5 * time.Second)
	ctx := context.Background()

	var out map[string]any
	err := c.Post(ctx, s.Tickets.URL, "/tickets", "k1", map[string]any{"request_id": id}, &out)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadGateway, apiErr.Status)
	require.Equal(t, 1, s.Tickets.Ledger.Stats().Effects, "the effect landed although the caller saw an error")

	// The caller, unable to tell, tries again: the ticket service does not deduplicate.
	require.NoError(t, c.Post(ctx, s.Tickets.URL, "/tickets", "k1", map[string]any{"request_id": id}, &out))
	st := s.Tickets.Ledger.Stats()
	require.Equal(t, 2, st.Effects)
	require.Equal(t, 1, st.DoubleEffects)
	require.Equal(t, []string{id}, st.Doubled)
	require.Equal(t, 2, st.MaxPerKey)

	var found map[string]any
	require.NoError(t, c.FindByKey(ctx, s.Tickets.URL, "/tickets", "k1", &found))
	require.Equal(t, "TCK-0001", found["id"], "the lookup returns the first effect the key landed")
	require.ErrorIs(t, c.FindByKey(ctx, s.Tickets.URL, "/tickets", "nope", &found), ErrNotFound)
}

func TestErrorBeforeCommitLandsNothing(t *testing.T) {
	fs := DefaultFaults(2)
	s := start(t, fs)
	id := identityWith(t, fs, ServicePayments, "", FaultErrorBeforeCommit)
	c := NewClient(5 * time.Second)
	err := c.Post(context.Background(), s.Payments.URL, "/refunds", "k", map[string]any{"order_id": id}, nil)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusServiceUnavailable, apiErr.Status)
	st := s.Payments.Ledger.Stats()
	require.Equal(t, 0, st.Effects)
	require.Equal(t, 1, st.Faults[FaultErrorBeforeCommit])
}

func TestEmailDeduplicatesByKey(t *testing.T) {
	fs := DefaultFaults(3)
	s := start(t, fs)
	id := identityWith(t, fs, ServiceEmail, "/ticket_opened", FaultLostAfterCommit)
	c := NewClient(5 * time.Second)
	ctx := context.Background()
	msg := map[string]any{"request_id": id, "template": "ticket_opened", "to": "ada@example.com"}

	require.Error(t, c.Post(ctx, s.Email.URL, "/messages", "key-1", msg, nil))
	var again map[string]any
	require.NoError(t, c.Post(ctx, s.Email.URL, "/messages", "key-1", msg, &again))
	require.Equal(t, "MSG-0001", again["id"])
	st := s.Email.Ledger.Stats()
	require.Equal(t, 1, st.Effects, "the same key lands one message")
	require.Equal(t, 1, st.DedupHits)

	// Without a key the e-mail service cannot tell: a second message goes out.
	require.NoError(t, c.Post(ctx, s.Email.URL, "/messages", "", msg, nil))
	require.Equal(t, 1, s.Email.Ledger.Stats().DoubleEffects)
}

func TestDirectory(t *testing.T) {
	s := start(t, NoFaults())
	c := NewClient(5 * time.Second)
	var cu Customer
	require.NoError(t, c.Get(context.Background(), s.Directory.URL, "/customers/C-1", &cu))
	require.Equal(t, "Ada", cu.Name)
	err := c.Get(context.Background(), s.Directory.URL, "/customers/C-404", &cu)
	require.True(t, errors.Is(err, ErrNotFound))
	require.Equal(t, 0, s.Directory.Ledger.Stats().Effects)
}
