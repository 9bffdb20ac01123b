// Package patroni starts a Patroni cluster of the caller's own on loopback: one etcd and Patroni
// nodes that bootstrap their own Postgres (initdb) into temporary directories, on free ports,
// with synchronous_mode and synchronous_mode_strict on, so a test can kill the primary and watch
// Patroni promote its synchronous standby. make faults' pg_failover_patroni row runs its soak on
// one. It may import internal/dev/privatepg and no other oncekey package.
package patroni
