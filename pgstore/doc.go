// Package pgstore is the Postgres oncekeystore.Store, on pgx/v5 pgxpool.
//
// Leases, retention and tombstones are judged on the database clock (now()). Claim is one
// INSERT … ON CONFLICT … RETURNING statement; Renew, Complete, Release and MarkUnknown are one
// UPDATE each, conditional on the epoch. It is an oncekeystore.ApprovalStore too (table
// oncekey_approvals, migration 003): RequestApproval is one INSERT … ON CONFLICT, DecideApproval
// one UPDATE conditional on the episode. Migrate applies the embedded, versioned migrations
// under an advisory lock. It must not import memstore, the interceptor or any Temporal package.
//
// Choices a caller can rely on:
//   - A pending Effectful record whose lease ran out becomes unknown at its current epoch (the
//     epoch is not bumped); the old owner's writes fail with ErrLostClaim because the record is
//     no longer pending.
//   - A released record stays bound to its fingerprint: only a claim with the same fingerprint
//     acquires it; another gets FingerprintMismatch.
//   - Results and failures over Options.MaxResultBytes (16 MiB by default) are refused with
//     *oncekeystore.ResultTooLargeError, never truncated.
//   - There is no change notification: a caller waiting for another attempt's claim polls
//     (Claim or Get) with bounded backoff (50 ms doubling to 2 s, within Policy.WaitInFlight,
//     10 s by default). LISTEN/NOTIFY was left out on purpose: a NOTIFY from Complete would put
//     every completing transaction through Postgres's single notification-queue lock at commit,
//     a cost on the hot path paid for the rare case of two attempts overlapping, and LISTEN
//     needs a connection held outside the pool for the life of every worker.
//   - On a pool in pgx's default mode (QueryExecModeCacheStatement) the store prepares its
//     statements once per connection (names "oncekey_" + a digest of the text) and runs them
//     through pgconn; in any other mode they go through pgx.Conn.Query unprepared. Behind a
//     connection pooler (PgBouncer in transaction mode), which the store finds by itself on its
//     first call (see DetectPooler), it prepares nothing on such a pool: its own statements go
//     unnamed in one round trip, the others in QueryExecModeExec. A startup parameter the pooler
//     refuses is a *PoolerError. A pgx.QueryTracer on the pool sees every statement either way.
//     Each Store prepares seven statements per connection (eight with Transactional tools) (the server keeps roughly 1 MB of
//     plans per connection for them); the approval statements, off the hot path, go through
//     pgx's own statement cache (prepared on a connection's first use in the default mode, not
//     at all in the others). Rows are decoded with pgx's built-in codecs: a codec
//     registered on the connections (a TimestamptzCodec with another ScanLocation, say) is not
//     used for the store's rows, so times come back in the local time zone as pgx's default
//     gives them; the instants are the same.
//
// Typical setup:
//
//	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil) // "" = libpq defaults
//	if err != nil { … }
//	if err := pgstore.Migrate(ctx, pool); err != nil { … }
//	store := pgstore.New(pool, nil)
//	if err := store.Check(ctx); err != nil { … } // table missing or not migrated: stop here
//
// A table that is missing where the store looks for it (Options.Schema, or the search_path when
// Schema is "") or not at the expected migration is a configuration mistake, not an outage:
// every call then fails with an error wrapping *oncekeystore.StoreSchemaError (Postgres's 42P01,
// 3F000, 42703 or 42883), never *oncekeystore.StoreUnavailableError, and its message says what to do.
//
// Setting it up: https://github.com/oncekey/oncekey/blob/main/docs/stores.md#postgres-pgstore
// Migrations, purge and retention: https://github.com/oncekey/oncekey/blob/main/docs/operating.md
// Options, with defaults: https://github.com/oncekey/oncekey/blob/main/docs/configuration.md#pgstoreoptions
package pgstore
