package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// A store on a pool opened with the same options: NewPool sets the server-side statement
// timeout, Migrate creates or upgrades the table, and New returns the oncekeystore.Store to give to
// the interceptor. (It needs Postgres, so it is compiled but not run.)
func ExampleNew() {
	ctx := context.Background()
	opts := &pgstore.Options{StatementTimeout: 5 * time.Second}
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), opts) // "" = PGHOST, PGUSER, …
	if err != nil {
		log.Fatal(err) // wraps *oncekeystore.StoreUnavailableError when the server is unreachable
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	store := pgstore.New(pool, opts)

	unknown, err := store.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown, Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(unknown.Records), "operation(s) waiting for reconciliation")
}

// A worker whose tables are migrated by a deploy step (`oncekey migrate --schema oncekey`) checks
// at startup that the store finds them, so that a wrong or missing Options.Schema stops it here
// rather than failing every tool call. (It needs Postgres, so it is compiled but not run.)
func ExampleStore_Check() {
	ctx := context.Background()
	opts := &pgstore.Options{Schema: "oncekey"} // the schema given to MigrateSchema or --schema
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), opts)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store := pgstore.New(pool, opts)
	if err := store.Check(ctx); err != nil {
		// *oncekeystore.StoreSchemaError: the table is missing or not migrated, and the message says
		// what to do; *oncekeystore.StoreUnavailableError: the server cannot be reached.
		log.Fatal(err)
	}
	// Give store to the interceptor (worker.NewPlugin, interceptor.New).
}
