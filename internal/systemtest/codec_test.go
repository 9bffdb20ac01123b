package systemtest_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// xorCodec stands in for an encrypting codec: it marks payloads and scrambles their bytes.
type xorCodec struct{}

const xorEncoding = "binary/xor-test"

func (xorCodec) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		b, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(xorEncoding)}, Data: xor(b)}
	}
	return out, nil
}

func (xorCodec) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.Metadata[converter.MetadataEncoding]) != xorEncoding {
			out[i] = p
			continue
		}
		var q commonpb.Payload
		if err := proto.Unmarshal(xor(p.Data), &q); err != nil {
			return nil, err
		}
		out[i] = &q
	}
	return out, nil
}

func xor(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = c ^ 0x5a
	}
	return out
}

// The client encodes payloads with a codec. Given to worker.Options.Plugins, the plugin cannot see
// the client's converter and would store results with the default one, in plain text: the worker
// refuses to start. Given to client.Options.Plugins, it stores results through the codec.
func TestPluginStoresResultsWithTheClientsCodec(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	l := newLedger()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), xorCodec{})

	// The plugin on the worker only: refused at start.
	plain, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Logger: quiet{}, DataConverter: dc})
	require.NoError(t, err)
	t.Cleanup(plain.Close)
	onWorker, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	w := sdkworker.New(plain, "oncekey-codec-worker-"+t.Name(), sdkworker.Options{Plugins: []sdkworker.Plugin{onWorker}})
	w.RegisterWorkflow(TicketWorkflow)
	w.RegisterActivity(l.CreateTicket)
	err = w.Start()
	var ce *worker.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "DataConverter", ce.Field)
	require.Contains(t, err.Error(), "client.Options.Plugins")
	if err == nil {
		w.Stop()
	}

	// The plugin on the client: the stored result went through the codec.
	onClient, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Logger: quiet{}, DataConverter: dc, Plugins: []client.Plugin{onClient}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-codec-client-" + t.Name()
	w = sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(TicketWorkflow)
	w.RegisterActivity(l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "codec-" + t.Name(), TaskQueue: tq, WorkflowExecutionTimeout: time.Minute},
		TicketWorkflow, TicketRequest{Customer: "acme", Subject: "secret subject line"}, CallOptions{StartToClose: 10 * time.Second})
	require.NoError(t, err)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, "secret subject line", got.Subject)
	res, err := store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.False(t, bytes.Contains(res.Records[0].Result, []byte("secret subject line")), "the stored result is in plain text")
	var ps commonpb.Payloads
	require.NoError(t, proto.Unmarshal(res.Records[0].Result, &ps))
	require.Equal(t, xorEncoding, string(ps.Payloads[0].Metadata[converter.MetadataEncoding]))
}

// recordingLogger keeps the messages of the warnings logged to it.
type recordingLogger struct {
	quiet
	mu    sync.Mutex
	warns []string
}

func (l *recordingLogger) Warn(msg string, _ ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warns = append(l.warns, msg)
}

// A plugin given a DataConverter other than the client's (the SDK's default beside a client that
// encodes with a codec) warns once, on the client's logger, that results are stored past the
// client's codec; given the client's own converter, or none, it says nothing.
func TestPluginWarnsOfAConverterOtherThanTheClients(t *testing.T) {
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), xorCodec{})
	for name, tc := range map[string]struct {
		opts converter.DataConverter
		warn bool
	}{
		"the default beside a codec": {converter.GetDefaultDataConverter(), true},
		"the client's own":           {dc, false},
		"none":                       {nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			plugin, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: oncekey.NewRegistry(), DataConverter: tc.opts})
			require.NoError(t, err)
			logger := &recordingLogger{}
			c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: logger, DataConverter: dc, Plugins: []client.Plugin{plugin}})
			require.NoError(t, err)
			defer c.Close()
			if !tc.warn {
				require.Empty(t, logger.warns)
				return
			}
			require.Len(t, logger.warns, 1)
			require.Contains(t, logger.warns[0], "is not the client's data converter")
			require.Contains(t, logger.warns[0], "Leave worker.Options.DataConverter nil")
		})
	}
}
