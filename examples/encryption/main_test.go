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

	"github.com/oncekey/oncekey/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newCodec(t *testing.T) *Codec {
	t.Helper()
	key, generated, err := KeyFromEnv(func(string) string { return "" }, KeyEnv)
	require.NoError(t, err)
	require.True(t, generated)
	c, err := NewCodec(key)
	require.NoError(t, err)
	return c
}

// TestStoredResultIsEncrypted runs the example with the codec and reads the row: the gift card's
// code is nowhere in it, the payload says it is encrypted, it decodes with the key and not
// without it, and a repeat of the operation from a fresh worker gets the right card back.
func TestStoredResultIsEncrypted(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	codec := newCodec(t)

	rep, err := Run(ctx, Config{Client: c, Pool: pool, Codec: codec})
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
	var ps commonpb.Payloads
	require.NoError(t, proto.Unmarshal(raw, &ps))
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
	again, err := Run(ctx, Config{Client: c, Pool: pool, Codec: codec, WorkflowID: rep.WorkflowID})
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
