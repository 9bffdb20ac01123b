package worker_test

// The code docs/policies-and-keys.md shows, compiled: a set of support tools, their policies, a
// worker that runs them, and a workflow step. The examples need Postgres and a Temporal server,
// so they are compiled but not run.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"

	"go.temporal.io/sdk/worker"
)

// TicketInput is the input of Tools.CreateTicket.
type TicketInput struct {
	Subject string `json:"subject"`
	TraceID string `json:"trace_id"`
}

// SupportTicket is what Tools.CreateTicket returns.
type SupportTicket struct {
	ID string `json:"id"`
}

// RefundInput is the input of Tools.IssueRefund.
type RefundInput struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// EmailInput is the input of Tools.SendConfirmation.
type EmailInput struct {
	To       string `json:"to"`
	TicketID string `json:"ticket_id"`
}

// Message is what the mail service returns for a sent message.
type Message struct {
	ID string `json:"id"`
}

// APIError is the mail service's error answer.
type APIError struct{ Status int }

func (e *APIError) Error() string { return fmt.Sprintf("mail service: HTTP %d", e.Status) }

// MailClient stands for a mail service's client that takes an idempotency key.
type MailClient struct{}

// Send sends in, with key as the request's Idempotency-Key.
func (*MailClient) Send(ctx context.Context, in EmailInput, key string) (Message, error) {
	return Message{ID: "m-" + key[len(key)-6:]}, nil
}

// Tools are the support agent's tools, registered as activities.
type Tools struct{ mail *MailClient }

func (t *Tools) LookupCustomer(ctx context.Context, email string) (string, error) {
	return "customer for " + email, nil
}

func (t *Tools) CreateTicket(ctx context.Context, in TicketInput) (SupportTicket, error) {
	ticket := SupportTicket{ID: "TCK-0042"}
	_ = oncekey.SetEffectReference(ctx, ticket.ID) // shown by `oncekey show`, kept on replays
	return ticket, nil
}

func (t *Tools) IssueRefund(ctx context.Context, in RefundInput) (string, error) {
	return "refund of " + in.OrderID, nil
}

func (t *Tools) SendConfirmation(ctx context.Context, in EmailInput) (Message, error) {
	key, _ := oncekey.OperationKey(ctx)
	msg, err := t.mail.Send(ctx, in, key) // Idempotency-Key: key
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == 503 {
		return msg, oncekey.NotApplied(err) // documented "nothing was done": safe to run again
	}
	return msg, err // anything else from an Effectful tool: outcome unknown
}

// checkRefundLimit is IssueRefund's Policy.Authorize: it runs before the refund and before a
// replay of it.
func checkRefundLimit(ctx context.Context, op oncekey.Operation) error {
	return nil
}

// A worker for the support tools: migrate, say what each tool does when repeated, check the
// store, install the plugin.
func Example_policies() {
	ctx := context.Background()
	tools := &Tools{mail: &MailClient{}}
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}

	// Once, at deploy time (or `oncekey migrate`):
	// pool is a *pgxpool.Pool (github.com/jackc/pgx/v5/pgxpool), e.g. from pgstore.NewPool.
	// pgstore.MigrateSchema(ctx, pool, "myschema") does the same in a schema of its own.
	err = pgstore.Migrate(ctx, pool)

	// Say what each tool does when repeated.
	// Set returns an error for a policy it cannot honour (an Exclude or ArgsKey field the
	// tool's input does not have, a zero Effect, ...): check it.
	reg := oncekey.NewRegistry()
	err = errors.Join(err,
		reg.Set(tools.LookupCustomer, oncekey.Policy{Effect: oncekey.ReadOnly}),
		reg.Set(tools.CreateTicket, oncekey.Policy{
			Effect:        oncekey.Effectful,
			RequireStepID: true,                 // scheduling it without WithStepID is an error
			Exclude:       []string{"trace_id"}, // not part of the fingerprint
		}),
		reg.Set(tools.IssueRefund, oncekey.Policy{
			Effect:    oncekey.Effectful,
			Authorize: checkRefundLimit, // runs before the effect and before any replay
		}),
		reg.Set(tools.SendConfirmation, oncekey.Policy{Effect: oncekey.Effectful}),
	)
	if err != nil {
		log.Fatal(err)
	}

	// The store, and a check at startup that its table is where it looks, fully migrated.
	store := pgstore.New(pool, nil) // after MigrateSchema: &pgstore.Options{Schema: "myschema"}
	if err := store.Check(ctx); err != nil {
		log.Fatal(err)
	}

	// Install it on the client: the plugin adds the interceptor to every worker of the client,
	// registers the reconciliation workflow and oncekey's activities, and stores results with
	// the client's data converter (its payload codec included).
	plugin, err := okworker.NewPlugin(okworker.Options{Store: store, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{Plugins: []client.Plugin{plugin}})
	if err != nil {
		log.Fatal(err)
	}
	w := worker.New(c, "support", worker.Options{})
	w.RegisterActivity(tools)
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

// RegisterUnderOwnName registers CreateTicket under a name of its own, and its policy under that
// name with SetAs.
func RegisterUnderOwnName(w worker.Worker, reg *oncekey.Registry, tools *Tools) error {
	w.RegisterActivityWithOptions(tools.CreateTicket, activity.RegisterOptions{Name: "create_ticket"})
	err := reg.SetAs("create_ticket", tools.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful})
	return err
}

// SupportStep is workflow code calling an Effectful tool under a stable step ID.
func SupportStep(ctx workflow.Context, in TicketInput) (SupportTicket, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var ticket SupportTicket
	tctx := oncekey.WithStepID(ctx, "create_ticket")
	err := workflow.ExecuteActivity(tctx, "CreateTicket", in).Get(tctx, &ticket)
	return ticket, err
}
