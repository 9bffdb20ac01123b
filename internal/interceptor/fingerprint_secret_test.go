package interceptor_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
)

// With Options.FingerprintSecret the stored fingerprint is a keyed one ("k1_…"), a repeat with
// the same arguments replays, and a worker without the secret on the same store refuses the
// repeat as a mismatch that names the secret and prints no digest digits. One effect downstream.
func TestSuiteFingerprintSecret(t *testing.T) {
	ds := newDownstream()
	shared := memstore.New(nil)
	secret := []byte("0123456789abcdef0123456789abcdef")
	sharedStore := func(oncekeystore.Store) oncekeystore.Store { return shared }
	keyed := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{store: sharedStore,
		opts: func(o *interceptor.Options) { o.FingerprintSecret = secret }})
	out := keyed.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err)
	require.Empty(t, out[1].Err, "the repeat replays")
	res, err := shared.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	fp := res.Records[0].Fingerprint
	require.Regexp(t, "^k1_[0-9a-f]{64}$", fp)

	plain := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{store: sharedStore})
	out = plain.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeFingerprintMismatch, out[0].Type, out[0].Err)
	require.Contains(t, out[0].Detail, "FingerprintSecret")
	require.NotContains(t, out[0].Detail, strings.TrimPrefix(fp, "k1_")[:8])
	require.False(t, regexp.MustCompile(`[0-9a-f]{12}`).MatchString(strings.ReplaceAll(out[0].Detail, res.Records[0].OperationKey, "")),
		"no digest digits: %s", out[0].Detail)
	effects, _ := ds.counts()
	require.Equal(t, 1, effects)
}

func TestFingerprintSecretTooShort(t *testing.T) {
	_, err := interceptor.New(interceptor.Options{Store: memstore.New(nil), Registry: oncekey.NewRegistry(), FingerprintSecret: []byte("short")})
	var ce *interceptor.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "FingerprintSecret", ce.Field)
}
