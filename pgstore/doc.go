// Package pgstore is the Postgres oncekey.Store, on pgx/v5 pgxpool.
//
// Leases, retention and tombstones are judged on the database clock (now()). Claim is one
// INSERT … ON CONFLICT … RETURNING statement. Migrate applies the embedded, versioned migrations
// under an advisory lock. It must not import memstore, the interceptor or any Temporal package.
package pgstore
