package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newKey(t *testing.T) []byte {
	t.Helper()
	key, generated, err := KeyFromEnv(func(string) string { return "" }, KeyEnv)
	require.NoError(t, err)
	require.True(t, generated)
	return key
}

func newCodec(t *testing.T) *Codec {
	t.Helper()
	c, err := NewCodec(newKey(t))
	require.NoError(t, err)
	return c
}

// newCodecAndSealer returns a codec and a sealer made from one key, as main does.
func newCodecAndSealer(t *testing.T) (*Codec, *Sealer) {
	t.Helper()
	key := newKey(t)
	c, err := NewCodec(key)
	require.NoError(t, err)
	s, err := NewSealer(key)
	require.NoError(t, err)
	return c, s
}

// TestStoredResultIsEncrypted runs the example with the codec and the sealer and reads the row:
// the gift card's code is nowhere in it, it is sealed, the payload inside says it is encrypted,
// it opens and decodes with the key and not without it, and a repeat of the operation from a
// fresh worker (the normal replay) gets the right card back.
func TestStoredResultIsEncrypted(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	codec, sealer := newCodecAndSealer(t)

	rep, err := Run(ctx, Config{Client: c, Pool: pool, Codec: codec, Sealer: sealer})
	require.NoError(t, err)
	require.Equal(t, 1, rep.ToolRuns)
	require.Equal(t, rep.Result.First, rep.Result.Again, "the repeat within the workflow is a replay")
	require.Empty(t, check(rep))
	card := rep.Result.First
	require.Regexp(t, `^GC-[0-9a-f]{16}$`, card.Code)

	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT result FROM oncekey_operations WHERE tenant = $1 AND operation_key = $2",
		tenant, rep.OperationKey).Scan(&raw))
	require.NotEmpty(t, raw)
	for _, secret := range []string{card.Code, card.Code[3:], "cus_42", `"code"`, "json/plain"} {
		require.False(t, bytes.Contains(raw, []byte(secret)), "%q is in the stored row", secret)
		require.False(t, bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString([]byte(secret)))), "base64 of %q is in the stored row", secret)
	}
	require.True(t, oncekey.IsSealedResult(raw))
	var sealed commonpb.Payloads
	require.Error(t, proto.Unmarshal(raw, &sealed), "sealed bytes are not payloads")
	opened, err := oncekey.OpenResult(ctx, sealer, tenant, rep.OperationKey, raw)
	require.NoError(t, err)
	var ps commonpb.Payloads
	require.NoError(t, proto.Unmarshal(opened, &ps))
	require.Len(t, ps.Payloads, 1)
	require.Equal(t, EncodingEncrypted, string(ps.Payloads[0].Metadata[converter.MetadataEncoding]))
	require.Equal(t, codec.KeyID(), string(ps.Payloads[0].Metadata[MetadataKeyID]))

	// With the key it decodes to the card; with another key it does not decode at all.
	var got GiftCard
	require.NoError(t, converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec).FromPayloads(&ps, &got))
	require.Equal(t, card, got)
	other := newCodec(t)
	require.Error(t, converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), other).FromPayloads(&ps, &got))
	require.Error(t, converter.GetDefaultDataConverter().FromPayloads(&ps, &got))

	// The same operation again, from a new client and worker with the same key: the stored,
	// encrypted result is replayed and decoded; the tool does not run.
	again, err := Run(ctx, Config{Client: c, Pool: pool, Codec: codec, Sealer: sealer, WorkflowID: rep.WorkflowID})
	require.NoError(t, err)
	require.Equal(t, rep.OperationKey, again.OperationKey)
	require.Zero(t, again.ToolRuns)
	require.Equal(t, card, again.Result.First)
	require.Equal(t, card, again.Result.Again)
	var raw2 []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT result FROM oncekey_operations WHERE tenant = $1 AND operation_key = $2",
		tenant, rep.OperationKey).Scan(&raw2))
	require.Equal(t, raw, raw2, "a replay does not rewrite the record")
}

// TestWithoutCodecThePlaintextIsThere is the control: the same check finds the code when no
// codec is installed, so the encrypted test's "not there" means something.
func TestWithoutCodecThePlaintextIsThere(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Client: c, Pool: pool})
	require.NoError(t, err)
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT result FROM oncekey_operations WHERE tenant = $1 AND operation_key = $2",
		tenant, rep.OperationKey).Scan(&raw))
	require.True(t, bytes.Contains(raw, []byte(rep.Result.First.Code)))
	require.NotEmpty(t, check(rep))
}

func TestCodecRoundTripAndTamper(t *testing.T) {
	codec := newCodec(t)
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
	in := GiftCard{Code: "GC-0011223344556677", CustomerID: "cus_1", AmountCents: 5}
	p, err := dc.ToPayload(in)
	require.NoError(t, err)
	require.False(t, bytes.Contains(p.Data, []byte(in.Code)))
	var out GiftCard
	require.NoError(t, dc.FromPayload(p, &out))
	require.Equal(t, in, out)

	// Two encodings of one value differ (fresh nonce); a flipped bit is refused.
	p2, err := dc.ToPayload(in)
	require.NoError(t, err)
	require.NotEqual(t, p.Data, p2.Data)
	p.Data[len(p.Data)-1] ^= 1
	require.Error(t, dc.FromPayload(p, &out))

	// A plain payload, written around the codec, is refused, not passed through.
	plain, err := converter.GetDefaultDataConverter().ToPayload(in)
	require.NoError(t, err)
	require.ErrorContains(t, dc.FromPayload(plain, &out), "not encrypted")
}

func TestKeyFromEnv(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	key := bytes.Repeat([]byte{7}, 32)
	got, generated, err := KeyFromEnv(env(base64.StdEncoding.EncodeToString(key)), KeyEnv)
	require.NoError(t, err)
	require.False(t, generated)
	require.Equal(t, key, got)
	_, _, err = KeyFromEnv(env("not base64!"), KeyEnv)
	require.Error(t, err)
	_, _, err = KeyFromEnv(env(base64.StdEncoding.EncodeToString(key[:16])), KeyEnv)
	require.ErrorContains(t, err, "want 32")
}

// The sealer opens what it sealed for the same record only: another operation key, another
// tenant, another key, plain bytes and a flipped bit are refused.
func TestSealerBindsToTheRecord(t *testing.T) {
	ctx := context.Background()
	_, s := newCodecAndSealer(t)
	_, other := newCodecAndSealer(t)
	plain := []byte("\x0a\x02hi")

	sealed, err := s.Seal(ctx, "t1", "ok1_a", plain)
	require.NoError(t, err)
	require.False(t, bytes.Contains(sealed, plain))
	got, err := s.Open(ctx, "t1", "ok1_a", sealed)
	require.NoError(t, err)
	require.Equal(t, plain, got)
	again, err := s.Seal(ctx, "t1", "ok1_a", plain)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce each time")

	_, err = s.Open(ctx, "t1", "ok1_b", sealed)
	require.ErrorContains(t, err, "not sealed for tenant")
	_, err = s.Open(ctx, "t2", "ok1_a", sealed)
	require.ErrorContains(t, err, "not sealed for tenant")
	// Length-prefixed parts: moving a character from the tenant to the key changes the binding.
	_, err = s.Open(ctx, "t", "1ok1_a", sealed)
	require.Error(t, err)
	_, err = other.Open(ctx, "t1", "ok1_a", sealed)
	require.ErrorContains(t, err, "sealed under key")
	_, err = s.Open(ctx, "t1", "ok1_a", plain)
	require.ErrorContains(t, err, "not sealed by this sealer")
	sealed[len(sealed)-1] ^= 1
	_, err = s.Open(ctx, "t1", "ok1_a", sealed)
	require.Error(t, err)
}

// A sealed result moved in Postgres to another row of the same tenant, or to a row of another
// tenant, is refused there with an error saying it was sealed for another record; the tool does
// not run again. Plain bytes (the codec's payloads written around the sealer) are refused too,
// and a worker without the sealer refuses a sealed result saying what to configure.
func TestSealedResultMovedOrPlainIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	codec, sealer := newCodecAndSealer(t)
	tools := &Tools{}
	run := func(cfg Config) (*Report, error) {
		cfg.Client, cfg.Pool, cfg.Codec, cfg.Tools = c, pool, codec, tools
		return Run(ctx, cfg)
	}
	a, err := run(Config{Sealer: sealer})
	require.NoError(t, err)
	b, err := run(Config{Sealer: sealer})
	require.NoError(t, err)
	o, err := run(Config{Sealer: sealer, Tenant: "encryption-other"})
	require.NoError(t, err)
	require.EqualValues(t, 3, tools.runs.Load())

	setResult := func(tenant, key string, result []byte) {
		t.Helper()
		tag, err := pool.Exec(ctx, "UPDATE oncekey_operations SET result = $3 WHERE tenant = $1 AND operation_key = $2", tenant, key, result)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	}
	refused := func(cfg Config, want ...string) {
		t.Helper()
		runs := tools.runs.Load()
		_, err := run(cfg)
		require.Error(t, err)
		// What the workflow's error says is for a model; the operator's account is in its details.
		d, ok := oncekey.ErrorDetails(err)
		require.True(t, ok, "oncekey's details on %v", err)
		for _, w := range want {
			require.Contains(t, d.Message, w)
		}
		require.Equal(t, runs, tools.runs.Load(), "the tool did not run again: never a second effect")
	}

	// Another row of the same tenant.
	setResult(tenant, b.OperationKey, a.StoredResult)
	refused(Config{Sealer: sealer, WorkflowID: b.WorkflowID}, "does not open", "sealed for another record or tenant", b.OperationKey)
	// A row of another tenant.
	setResult("encryption-other", o.OperationKey, a.StoredResult)
	refused(Config{Sealer: sealer, WorkflowID: o.WorkflowID, Tenant: "encryption-other"}, "does not open", o.OperationKey)
	// Plain bytes: the codec's payloads, unsealed, written straight into the row.
	opened, err := oncekey.OpenResult(ctx, sealer, tenant, a.OperationKey, a.StoredResult)
	require.NoError(t, err)
	setResult(tenant, b.OperationKey, opened)
	refused(Config{Sealer: sealer, WorkflowID: b.WorkflowID}, "is not sealed", "written around the sealer")
	// A worker without the sealer, on a sealed row.
	refused(Config{WorkflowID: a.WorkflowID}, "has no ResultSealer", "give every worker of the deployment the ResultSealer")

	// The row left alone still replays.
	again, err := run(Config{Sealer: sealer, WorkflowID: a.WorkflowID})
	require.NoError(t, err)
	require.Zero(t, again.ToolRuns)
	require.Equal(t, a.Result.First, again.Result.First)
}
