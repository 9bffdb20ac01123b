package interceptor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/oncekeystore"
)

// handingOff is a CreateTicket whose body hands its result off to an asynchronous completion.
type handingOff struct {
	mu     sync.Mutex
	token  []byte
	bodies int
}

func (h *handingOff) CreateTicket(ctx context.Context, in TicketRequest) (Ticket, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bodies++
	h.token = activity.GetInfo(ctx).TaskToken
	return Ticket{}, activity.ErrResultPending
}

// On the SDK's test environment, whose activities have no Temporal client to read a history
// with, an Effectful tool may still hand its result off: the body runs once, the record keeps
// the hand-off (nothing can settle it there, and nothing panics trying), and the completion the
// test sends reaches the workflow.
func TestHandOffOnTheTestEnvironment(t *testing.T) {
	ds := newDownstream()
	h := &handingOff{}
	var env *testsuite.TestWorkflowEnvironment
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		ticketTool: h.CreateTicket,
		env:        func(e *testsuite.TestWorkflowEnvironment) { env = e },
	})
	env.RegisterDelayedCallback(func() {
		h.mu.Lock()
		tok := h.token
		h.mu.Unlock()
		require.NotNil(t, tok, "the body ran and handed off")
		require.NoError(t, env.CompleteActivity(tok, Ticket{ID: "T-9", Customer: "acme"}, nil))
	}, 2*time.Second)
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "s1", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-9", out[0].Ticket.ID)
	require.Equal(t, 1, h.bodies)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusPending, recs[0].Status)
	_, waits := activities.HandOffOf(recs[0])
	require.True(t, waits, "the record keeps the hand-off for a worker with a client to settle")
}
