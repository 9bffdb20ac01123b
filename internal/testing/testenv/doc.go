// Package testenv gives oncekey's tests real services: a fresh Postgres schema per test (in the
// test database, created when missing), a private Postgres instance for a test that restarts
// the server, and a shared Temporal dev server per test binary. A missing service skips the
// test, or fails it when the CI environment variable is set. It is imported by tests only.
package testenv
