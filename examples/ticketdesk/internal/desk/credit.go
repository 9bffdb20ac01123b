package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/interceptor"

	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
	"github.com/oncekey/oncekey/pgstore"
)

// ToolGrantCredit is the Transactional tool: it writes a goodwill credit to the credit ledger, a
// table in the demo's own schema, and the confirmation e-mail to the outbox, in the transaction
// oncekey commits with the record's completion.
const ToolGrantCredit = "GrantCredit"

// ServiceLedger names the credit ledger in the fault schedule and the report.
const ServiceLedger = "credit_ledger"

// TemplateCreditGranted is the template of the e-mail confirming a credit.
const TemplateCreditGranted = "credit_granted"

// OutboxTopicEmail is the outbox topic of the credit's confirmation e-mail.
const OutboxTopicEmail = "email"

// creditLedgerDDL creates the credit ledger. run is the run's label ("oncekey-<tag>" or
// "plain-<tag>"): both runs write to the one table, and each counts its own rows.
const creditLedgerDDL = `CREATE TABLE IF NOT EXISTS credit_ledger (
    id           bigserial PRIMARY KEY,
    run          text NOT NULL,
    request_id   text NOT NULL,
    customer_id  text NOT NULL,
    amount_cents bigint NOT NULL,
    currency     text NOT NULL,
    reason       text NOT NULL,
    granted_at   timestamptz NOT NULL DEFAULT now()
)`

// CreditInput is GrantCredit's argument.
type CreditInput struct {
	RequestID   string `json:"request_id"`
	CustomerID  string `json:"customer_id"`
	To          string `json:"to"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Reason      string `json:"reason"`
	TraceID     string `json:"trace_id,omitempty"`
}

// Credit is GrantCredit's result.
type Credit struct {
	ID          int64  `json:"id"`
	RequestID   string `json:"request_id"`
	CustomerID  string `json:"customer_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
}

// creditDelay is the pause of a delayed GrantCredit body.
const creditDelay = 300 * time.Millisecond

// creditFaults applies the run's fault schedule to the credit ledger: the attempt-th call for a
// request (counted by the tool, as a service counts its requests) meets Faults.For(ServiceLedger,
// request, attempt). error_before_commit: the body writes its row, then fails, and its
// transaction rolls back; lost_after_commit: the transaction commits and the answer is lost on
// the way back (answerLoss); delay: the body is slow.
type creditFaults struct {
	mu       sync.Mutex
	attempts map[string]int
	counted  map[downstream.Fault]int
}

func (c *creditFaults) next(f downstream.Faults, request string) downstream.Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attempts == nil {
		c.attempts, c.counted = map[string]int{}, map[downstream.Fault]int{}
	}
	c.attempts[request]++
	fault := f.For(ServiceLedger, request, c.attempts[request])
	if fault != downstream.FaultNone {
		c.counted[fault]++
	}
	return fault
}

func (c *creditFaults) snapshot() map[downstream.Fault]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counted)
}

// GrantCredit grants a goodwill credit (Transactional). With oncekey it writes the ledger row
// and the confirmation e-mail's outbox message through pgstore.Tx: both commit with the record's
// completion, or neither does. Without oncekey (Plain) it does what a tool does on its own: the
// row in a transaction of its own, then the e-mail straight to the e-mail service.
func (t *Tools) GrantCredit(ctx context.Context, in CreditInput) (Credit, error) {
	fault := t.credits.next(t.Faults, in.RequestID)
	if fault == downstream.FaultDelay {
		time.Sleep(creditDelay)
	}
	out := Credit{RequestID: in.RequestID, CustomerID: in.CustomerID, AmountCents: in.AmountCents, Currency: in.Currency, Status: "granted"}
	mail := map[string]any{"request_id": in.RequestID, "to": in.To, "template": TemplateCreditGranted}
	write := func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO credit_ledger (run, request_id, customer_id, amount_cents, currency, reason)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, t.Run, in.RequestID, in.CustomerID, in.AmountCents, in.Currency, in.Reason).Scan(&out.ID)
		if err != nil {
			return err
		}
		if fault == downstream.FaultErrorBeforeCommit {
			return errors.New("ticketdesk: credit ledger lost its connection before the commit; nothing was written, try again")
		}
		return nil
	}
	if t.Plain {
		if err := pgx.BeginFunc(ctx, t.Pool, write); err != nil {
			return Credit{}, err
		}
		var m Message
		if err := t.Client.Post(ctx, t.Services.Email.URL, "/messages", "", mail, &m); err != nil {
			return Credit{}, err
		}
	} else {
		tx, err := pgstore.Tx(ctx)
		if err != nil {
			return Credit{}, err
		}
		if err := write(tx); err != nil {
			return Credit{}, err // oncekey rolls the row back
		}
		b, err := json.Marshal(mail)
		if err != nil {
			return Credit{}, err
		}
		if err := pgstore.Enqueue(ctx, OutboxTopicEmail, b); err != nil {
			return Credit{}, err
		}
	}
	if fault == downstream.FaultLostAfterCommit {
		loseAnswer(ctx)
	}
	return out, nil
}

// deliverEmail is the outbox relay's deliver function: it posts the message to the e-mail
// service with the message's own Idempotency-Key (derived from the operation key and the topic),
// so a message delivered again is not sent again. It counts the deliveries and the attempts.
func (t *Tools) deliverEmail(ctx context.Context, m *pgstore.OutboxMessage) error {
	t.deliveryAttempts.Add(1)
	if m.Topic != OutboxTopicEmail {
		return fmt.Errorf("ticketdesk: outbox topic %q has no receiver", m.Topic)
	}
	var mail map[string]any
	if err := json.Unmarshal(m.Payload, &mail); err != nil {
		return fmt.Errorf("ticketdesk: outbox e-mail for %s: %w", m.OperationKey, err)
	}
	var out Message
	if err := t.Client.Post(ctx, t.Services.Email.URL, "/messages", m.IdempotencyKey(), mail, &out); err != nil {
		return err
	}
	t.deliveries.Add(1)
	return nil
}

// lostKey carries an attempt's *atomic.Bool set by loseAnswer.
type lostKey struct{}

// loseAnswer marks the attempt's answer as lost on the way back (answerLoss acts on it).
func loseAnswer(ctx context.Context) {
	if lost, ok := ctx.Value(lostKey{}).(*atomic.Bool); ok {
		lost.Store(true)
	}
}

// answerLoss is a worker interceptor standing for an answer lost after the commit: the first
// in worker.Options.Interceptors, it wraps everything below it, oncekey's interceptor and its
// commit included, and turns the success of an attempt whose body called loseAnswer into a
// retryable error. Temporal then runs the call again, as it would after a lost answer.
type answerLoss struct {
	interceptor.WorkerInterceptorBase
}

func (*answerLoss) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &answerLossInbound{}
	i.Next = next
	return i
}

type answerLossInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *answerLossInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	lost := new(atomic.Bool)
	res, err := i.Next.ExecuteActivity(context.WithValue(ctx, lostKey{}, lost), in)
	if err == nil && lost.Load() {
		return nil, errors.New("ticketdesk: connection reset while sending the answer (the credit was committed)")
	}
	return res, err
}

// creditLedger counts a run's rows in the credit ledger: the effects, by the table the body
// writes, never by what a caller was told.
func creditLedger(ctx context.Context, pool *pgxpool.Pool, run string) (downstream.Stats, error) {
	st := downstream.Stats{Faults: map[downstream.Fault]int{}}
	rows, err := pool.Query(ctx, `SELECT request_id, count(*) FROM credit_ledger WHERE run = $1 GROUP BY request_id ORDER BY request_id`, run)
	if err != nil {
		return st, fmt.Errorf("desk: count the credit ledger: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return st, err
		}
		st.Effects += n
		st.Identities++
		if n > 1 {
			st.DoubleEffects += n - 1
			st.Doubled = append(st.Doubled, id)
		}
	}
	return st, rows.Err()
}
