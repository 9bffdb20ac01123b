// Package privatepg starts a Postgres instance of the caller's own: initdb into a temporary
// directory and the server on a free loopback port, stopped and removed when the caller is done.
// `make bench` measures against it, the restart tests stop and start it, and the failover tests
// kill it and promote a standby of it (StartStandby, Kill, Promote), so nobody's own server is
// touched. StartPgBouncer puts a private PgBouncer in front of a server, for the tests that run
// the store through a pooler in transaction mode. It must not import any oncekey package.
package privatepg
