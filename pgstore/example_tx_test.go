package pgstore_test

import (
	"context"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
)

type Credit struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

type Entry struct {
	ID int64 `json:"id"`
}

type Acts struct{}

// AddCredit is a Transactional tool: its INSERT commits together with its record's completion,
// or not at all.
func (a *Acts) AddCredit(ctx context.Context, in Credit) (Entry, error) {
	tx, err := pgstore.Tx(ctx) // pgstore.ErrNoTx outside a Transactional body
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	err = tx.QueryRow(ctx, `INSERT INTO credit_ledger (account, amount) VALUES ($1, $2) RETURNING id`,
		in.Account, in.Amount).Scan(&e.ID)
	return e, err // oncekey commits, or rolls back on an error
}

// A tool whose effect is a row in the application's own Postgres is Transactional: exactly once,
// never unknown. (The worker needs a pgstore Store; it is compiled but not run.)
func ExampleTx() {
	acts := &Acts{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(acts.AddCredit, oncekey.Policy{Effect: oncekey.Transactional}); err != nil {
		panic(err)
	}
	// Give reg and a pgstore Store to worker.NewPlugin; register acts.AddCredit on the worker.
}
