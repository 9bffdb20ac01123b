// Package pgstore is the Postgres oncekey.Store, on pgx/v5 pgxpool.
//
// Leases, retention and tombstones are judged on the database clock (now()). Claim is one
// INSERT … ON CONFLICT … RETURNING statement; Renew, Complete, Release and MarkUnknown are one
// UPDATE each, conditional on the epoch. Migrate applies the embedded, versioned migrations
// under an advisory lock. It must not import memstore, the interceptor or any Temporal package.
//
// Choices a caller can rely on:
//   - A pending Effectful record whose lease ran out becomes unknown at its current epoch (the
//     epoch is not bumped); the old owner's writes fail with ErrLostClaim because the record is
//     no longer pending.
//   - A released record stays bound to its fingerprint: only a claim with the same fingerprint
//     acquires it; another gets FingerprintMismatch.
//   - Results and failures over Options.MaxResultBytes (16 MiB by default) are refused with
//     *oncekey.ResultTooLargeError, never truncated.
//   - There is no change notification: a caller waiting for another attempt's claim polls
//     (Claim or Get) with bounded backoff.
//
// Typical setup:
//
//	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil) // "" = libpq defaults
//	if err != nil { … }
//	if err := pgstore.Migrate(ctx, pool); err != nil { … }
//	store := pgstore.New(pool, nil)
package pgstore
