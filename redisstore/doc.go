// Package redisstore is an oncekeystore.Store on Redis 7 (github.com/redis/go-redis/v9), for teams
// whose shared state is Redis. It gives a weaker promise than pgstore: Redis acknowledges a
// write before it is on disk (appendfsync everysec or no) and before any replica has it, so a
// crash or a failover can lose a claim or an applied record, and a repeat of the call then runs
// the effect a second time. docs/stores.md says which store to choose for which promise.
//
// It is a module of its own (github.com/oncekey/oncekey/redisstore, with its own go.mod) so
// that a program that uses pgstore or memstore only never downloads or builds go-redis: the
// core module's dependency set stays small. It must not import pgstore, memstore, the
// interceptor or any Temporal package.
//
// How it keeps the contract:
//   - Every state change (Claim, Renew, Complete, Release, MarkUnknown, Resolve) is one Lua
//     script, run atomically by the server with EVALSHA (EVAL when the server's script cache
//     lost it). Fenced writes check the epoch and the pending status inside the script.
//   - Leases, retention and tombstone windows are judged on the server's clock: each script
//     reads TIME. Redis 7 replicates scripts by their effects, so replicas apply the same
//     times. Check refuses an older Redis.
//   - Records are spread over Options.Buckets buckets (16 by default) by a hash of tenant and
//     key. A bucket's records and its indexes share one hash tag, {b<n>}, so each script
//     touches one hash slot and the store works on Redis Cluster. (Scripts that walk an index
//     build the record keys they visit from the bucket's key base; they are in the same slot.)
//   - The indexes are sorted sets kept by the same scripts: per bucket, every record by
//     (updated, tenant, key), each tenant's records, the unknown records, and retention and
//     tombstone ends by time. List merges the buckets' indexes page by page, Purge takes
//     records past their windows from the time indexes in batches, and Forget walks the
//     tenant's index in batches: no call scans the keyspace or holds the server for long.
//   - Results and failures are stored byte for byte; nil and empty stay distinct. Results over
//     Options.MaxResultBytes (16 MiB by default) are refused with *oncekeystore.ResultTooLargeError.
//   - go-redis sends a command again when the connection breaks after it was sent. A claim
//     carries its claim token, and each fenced write and resolution a write token, so the
//     repeat of one whose reply was lost reports what the first did (acquired, written), not a
//     live claim or ErrLostClaim.
//   - It is an oncekeystore.ApprovalStore too: an approval is one hash in the bucket of its operation
//     key, with indexes of its own there (by request, per tenant, by end of retention).
//     RequestApproval and DecideApproval are one script each, on the server's clock, carrying a
//     request and a write token like the record scripts; ListApprovals, Purge and Forget walk the
//     approval indexes as they walk the records'.
//
// Typical setup:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // or redis.NewClusterClient
//	store, err := redisstore.New(rdb, nil)
//	if err != nil { … }
//	if err := store.Check(ctx); err != nil { … } // unreachable or older than Redis 7: stop here
package redisstore
