package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// The missing-schema error names an `oncekey migrate --schema` command; a hostile schema name is
// one inert word in it.
func TestMissingSchemaCommandQuotesHostileNames(t *testing.T) {
	t.Parallel()
	pool := testenv.Postgres(t)
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
			continue // not a name Postgres takes
		}
		s := pgstore.New(pool, &pgstore.Options{Schema: "s-" + v})
		_, err := s.Claim(ctxT(t), claimParams("ok1_q", oncekeystore.Effectful))
		var se *oncekeystore.StoreSchemaError
		require.True(t, errors.As(err, &se), "%q: %v", v, err)
		var cmd string
		for i, part := range strings.Split(se.Fix, "`") {
			if i%2 == 1 && strings.HasPrefix(part, "oncekey migrate") {
				cmd = part
			}
		}
		require.NotEmpty(t, cmd, "%q: %s", v, se.Fix)
		require.Equal(t, []string{"oncekey", "migrate", "--schema", "s-" + v}, shelltest.Args(t, cmd), "%q: %s", v, se.Fix)
	}
}
