package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// A schema migrated before 010_decision_signatures keeps working for records, unsigned
// resolutions included; a signed resolution and ResolutionSignature fail with a StoreSchemaError
// naming the migration, and change nothing.
func TestStoreBeforeSignatureMigration(t *testing.T) {
	t.Parallel()
	url, schema := testenv.PostgresURL(t)
	pool := poolOn(t, url, bothPaths[0])
	ctx := ctxT(t)
	require.NoError(t, pgstore.Migrate(ctx, pool))
	require.NoError(t, pgstore.MigrateDownSchema(ctx, pool, "", 9))
	s := pgstore.New(pool, nil)

	unknown := func(key string) *oncekeystore.Record {
		p := claimParams(key, oncekeystore.Effectful)
		p.Lease = time.Minute
		c, err := s.Claim(ctx, p)
		require.NoError(t, err, "records work without the signature columns")
		require.True(t, c.Acquired)
		r, err := s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: key, Epoch: c.Record.Epoch})
		require.NoError(t, err)
		return r
	}
	r := unknown("ok1_unsigned")
	_, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: "ok1_unsigned", Epoch: r.Epoch, Status: oncekeystore.StatusReleased, ResolvedBy: "ada"})
	require.NoError(t, err, "an unsigned resolution works without the signature columns")

	r = unknown("ok1_signed")
	want := "table oncekey_operations in the connection's search_path (" + schema +
		") is not at the migration this version of oncekey expects: the column signature is missing (migration 010_decision_signatures is not applied)"
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: "ok1_signed", Epoch: r.Epoch, Status: oncekeystore.StatusReleased,
		ResolvedBy: "ada", Signature: []byte(`{}`)})
	requireSchemaError(t, err, "42703", want)
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_signed"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, got.Status, "the refused resolution changed nothing")
	_, err = s.ResolutionSignature(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_signed"})
	requireSchemaError(t, err, "42703", want)

	require.NoError(t, pgstore.Migrate(ctx, pool))
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: "ok1_signed", Epoch: r.Epoch, Status: oncekeystore.StatusReleased,
		ResolvedBy: "ada", Signature: []byte(`{}`)})
	require.NoError(t, err)
	sig, err := s.ResolutionSignature(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_signed"})
	require.NoError(t, err)
	require.Equal(t, `{}`, string(sig))
}
