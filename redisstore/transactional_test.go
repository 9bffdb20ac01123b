package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	okworker "github.com/oncekey/oncekey/worker"
)

func AddCredit(context.Context, string) (string, error) { return "", nil }

// Redis keeps no application data to commit a tool's writes with: a Transactional tool over
// redisstore is refused when the worker is set up, with the typed error that says what to use.
func TestTransactionalRefused(t *testing.T) {
	s, _ := setup(t, nil)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(AddCredit, oncekey.Policy{Effect: oncekeystore.Transactional}))
	_, err := okworker.NewInterceptor(okworker.Options{Store: s, Registry: reg})
	var refused *oncekeystore.TransactionalStoreError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "AddCredit", refused.Tool)
	require.Contains(t, err.Error(), "use pgstore")
}
