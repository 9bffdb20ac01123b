package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DurabilityWarnings reads the settings of the server pool reaches that decide whether a
// commit it acknowledged survives a crash and a failover, and returns one sentence for each
// that does not keep oncekey's promise (https://github.com/oncekey/oncekey/blob/main/docs/stores.md#failover),
// each saying what to set; nil when it sees none:
//
//   - fsync off: a crash of the machine can lose acknowledged commits;
//   - synchronous_commit off (as the connection sees it: the server's, the database's or the
//     role's setting): a crash can lose the last acknowledged commits;
//   - standbys streaming from this server while synchronous_standby_names is empty, or that are
//     not synchronous now: a failover to one can lose the last acknowledged commits;
//   - synchronous standbys with synchronous_commit local or remote_write: a commit returns
//     before a standby has flushed it.
//
// It sees only this server: a managed service's replicas that do not stream from it (or that
// pg_stat_replication does not show to this role), and the failover policy that picks which
// replica to promote, are beyond it, so no warning is not a proof. It changes nothing. An
// error reading the settings is returned as is.
func DurabilityWarnings(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var (
		fsync, syncCommit, syncNames string
		standbys, syncStandbys       int
	)
	err := pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
    current_setting('synchronous_standby_names'),
    (SELECT count(*) FROM pg_catalog.pg_stat_replication)::int,
    (SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))::int`).
		Scan(&fsync, &syncCommit, &syncNames, &standbys, &syncStandbys)
	if err != nil {
		return nil, fmt.Errorf("pgstore: durability settings: %w", err)
	}
	var out []string
	if fsync == "off" {
		out = append(out, "fsync is off: a crash of the machine can lose commits the server acknowledged, and oncekey then forgets claims; set fsync = on")
	}
	if syncCommit == "off" {
		out = append(out, "synchronous_commit is off: a crash can lose the last commits the server acknowledged, and oncekey then forgets claims; set synchronous_commit = on (for the server, or ALTER ROLE/ALTER DATABASE for oncekey's)")
	}
	switch {
	case standbys > 0 && syncNames == "":
		out = append(out, fmt.Sprintf("%d standby(s) stream from this server asynchronously (synchronous_standby_names is empty): a failover to one can lose the last commits; set synchronous_standby_names and fail over only to a synchronous standby", standbys))
	case standbys > syncStandbys:
		out = append(out, fmt.Sprintf("%d of the %d standbys streaming from this server are not synchronous now (sync_state async or potential): a failover to one of them can lose the last commits; fail over only to a synchronous standby", standbys-syncStandbys, standbys))
	}
	if syncStandbys > 0 && (syncCommit == "local" || syncCommit == "remote_write") {
		out = append(out, fmt.Sprintf("synchronous_commit is %s: a commit returns before the synchronous standby has flushed it, so a failover can lose it; set synchronous_commit = on", syncCommit))
	}
	return out, nil
}
