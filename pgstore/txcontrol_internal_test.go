package pgstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// endsTx finds every statement that would end a Transactional body's transaction, whatever its
// spelling, and nothing else.
func TestEndsTx(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"COMMIT":                          "COMMIT",
		"commit":                          "COMMIT",
		"END":                             "END",
		"end transaction":                 "END",
		"commit; begin":                   "COMMIT",
		"COMMIT AND CHAIN":                "COMMIT",
		"  \n\t-- done\nCommit work":      "COMMIT",
		"/* a /* nested */ comment */END": "END",
		"ROLLBACK":                        "ROLLBACK",
		"rollback;":                       "ROLLBACK",
		"ROLLBACK AND CHAIN":              "ROLLBACK",
		"ABORT":                           "ABORT",
		"PREPARE TRANSACTION 'x'":         "PREPARE TRANSACTION",
		"INSERT INTO t VALUES (1); COMMIT; BEGIN; INSERT INTO t VALUES (2)": "COMMIT",
		"SELECT ';'; commit":                 "COMMIT",
		`SELECT "a;b"; END`:                  "END",
		"SELECT $$;$$; END":                  "END",
		"SELECT $x$ ; $y$ $x$; END":          "END",
		`SELECT E'\';'; COMMIT`:              "COMMIT",
		"SELECT 'it''s;'; COMMIT":            "COMMIT",
		"SELECT 1 -- ; COMMIT\n; ROLLBACK":   "ROLLBACK",
		"SELECT 1 /* ; COMMIT */ ; ROLLBACK": "ROLLBACK",
		"ROLLBACK TRANSACTION":               "ROLLBACK",
		// A literal continued on a new line keeps its mode: the escape string goes on.
		"SELECT E'a'\n'b\\''; COMMIT; --'":          "COMMIT",
		"SELECT E'a' -- c\n\v\t'b\\''; COMMIT; --'": "COMMIT",
		"SELECT E'a'\r'b\\''; COMMIT; --'":          "COMMIT",
		// With standard_conforming_strings off, a plain literal reads backslash escapes.
		"SELECT 'a\\''; COMMIT; --'":  "COMMIT",
		"SELECT N'a\\''; END; --'":    "END",
		"SELECT 'a'\n'\\''; END; --'": "END",
		// A bit string has neither: a doubled quote ends it, the next literal is a plain one.
		"SELECT B'0''\\''; COMMIT; --'": "COMMIT",
		"SELECT X'\\'; COMMIT; --'":     "COMMIT",
		// A -- comment ends at \r too.
		"SELECT 1; -- x\rCOMMIT": "COMMIT",

		// Statements that keep the transaction.
		"INSERT INTO ledger VALUES ('commit', 5)":            "",
		"SELECT 'COMMIT; END'":                               "",
		"SELECT $$ commit; end $$":                           "",
		"SELECT $tag$ ; commit $tag$":                        "",
		`SELECT "commit"`:                                    "",
		"SELECT 1 -- ; commit":                               "",
		"SELECT 1 /* ; commit */":                            "",
		"SAVEPOINT a":                                        "",
		"ROLLBACK TO SAVEPOINT a":                            "",
		"rollback to a":                                      "",
		"ROLLBACK WORK TO SAVEPOINT a":                       "",
		"RELEASE SAVEPOINT a":                                "",
		"BEGIN":                                              "",
		"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE":       "",
		"UPDATE t SET a = $1 WHERE b = $2":                   "",
		"SELECT endpoint, committed FROM t":                  "",
		"PREPARE p AS SELECT 1":                              "",
		"DO $$BEGIN PERFORM 1; END$$":                        "",
		"INSERT INTO t (x) VALUES (1) RETURNING x; SELECT 2": "",
		"SELECT 'a\\'":                                       "",
		"SELECT 'a\\', 'commit'":                             "",
		"SELECT U&'a\\'":                                     "",
		"SELECT 1 AS x$$; SELECT 2; x$$":                     "",
		"commit2":                                            "",
		"":                                                   "",
	} {
		got, ends := endsTx(sql)
		require.Equal(t, want, got, "%q", sql)
		require.Equal(t, want != "", ends, "%q", sql)
	}
}
