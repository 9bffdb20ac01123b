package payloadview

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func payloads(t *testing.T, ps ...*commonpb.Payload) []byte {
	t.Helper()
	b, err := proto.Marshal(&commonpb.Payloads{Payloads: ps})
	require.NoError(t, err)
	return b
}

func payload(enc, data string) *commonpb.Payload {
	return &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(enc)}, Data: []byte(data)}
}

func TestDecode(t *testing.T) {
	require.Equal(t, json.RawMessage(`{"id":"BK-1"}`), Decode(payloads(t, payload(converter.MetadataEncodingJSON, `{"id":"BK-1"}`))))
	require.Nil(t, Decode(payloads(t, payload(converter.MetadataEncodingNil, ""))))
	require.Equal(t, map[string]string{"encoding": "binary/encrypted", "base64": "AAE="}, Decode(payloads(t, payload("binary/encrypted", "\x00\x01"))))
	require.Equal(t, []any{json.RawMessage(`1`), json.RawMessage(`"a"`)},
		Decode(payloads(t, payload(converter.MetadataEncodingJSON, `1`), payload(converter.MetadataEncodingJSON, `"a"`))))
	// JSON metadata over bytes that are not JSON is shown as bytes, not as broken JSON.
	require.Equal(t, map[string]string{"encoding": converter.MetadataEncodingJSON, "base64": "e25v"}, Decode(payloads(t, payload(converter.MetadataEncodingJSON, `{no`))))
	got, ok := Decode([]byte{0xff, 0xff}).(map[string]string)
	require.True(t, ok)
	require.Equal(t, "//8=", got["base64"])
	require.NotEmpty(t, got["undecodable"])
}

// A result sealed by a ResultSealer is shown as sealed, with its size, never as undecodable bytes.
func TestDecodeSealed(t *testing.T) {
	got, ok := Decode([]byte("oksealed1:\x01\x02\x03")).(map[string]any)
	require.True(t, ok)
	require.Contains(t, got["sealed"], "ResultSealer")
	require.Equal(t, 13, got["bytes"])
}
