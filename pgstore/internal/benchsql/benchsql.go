// Package benchsql hands pgstore's own statements to the project's benchmarks, which run the
// identical SQL through pgbench and pgx; pgstore sets each function when it is initialised.
// Nothing outside this module can import it.
package benchsql

// Claim, TransactionalClaim and Complete return pgstore's claim statement, the claim statement
// of Transactional tools and the complete statement for table (a sanitized, possibly
// schema-qualified name), with the parameters their doc comments in pgstore list.
var Claim, TransactionalClaim, Complete func(table string) string
