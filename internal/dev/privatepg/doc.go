// Package privatepg starts a Postgres instance of the caller's own: initdb into a temporary
// directory and the server on a free loopback port, stopped and removed when the caller is done.
// `make bench` measures against it and the restart tests stop and start it, so nobody's own
// server is touched. It must not import any oncekey package.
package privatepg
