// Package payloadview turns a stored result (proto-marshalled Temporal payloads, as the
// interceptor stores them) into a value a person can read, for the CLI's show and the inbox.
// It must not import the interceptor, workflows, activities or worker packages.
package payloadview

import (
	"encoding/base64"
	"encoding/json"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
)

// Decode returns b as something printable: a JSON payload as its json.RawMessage, a nil payload
// as nil, anything else (a codec's output, protobuf) as {"encoding": …, "base64": …}; several
// payloads as a slice of those. Bytes that are not Payloads come back as
// {"undecodable": reason, "base64": …}, and a result sealed by the workers' ResultSealer as
// {"sealed": what to know, "bytes": its size}. It never fails.
func Decode(b []byte) any {
	if oncekey.IsSealedResult(b) {
		return map[string]any{"sealed": "sealed to its record by the workers' ResultSealer (okworker.Options.ResultSealer); not readable here", "bytes": len(b)}
	}
	ps := &commonpb.Payloads{}
	if err := proto.Unmarshal(b, ps); err != nil {
		return map[string]string{"undecodable": err.Error(), "base64": base64.StdEncoding.EncodeToString(b)}
	}
	out := make([]any, 0, len(ps.Payloads))
	for _, p := range ps.Payloads {
		enc := string(p.Metadata[converter.MetadataEncoding])
		switch {
		case enc == converter.MetadataEncodingJSON && json.Valid(p.Data):
			out = append(out, json.RawMessage(p.Data))
		case enc == converter.MetadataEncodingNil:
			out = append(out, nil)
		default:
			out = append(out, map[string]string{"encoding": enc, "base64": base64.StdEncoding.EncodeToString(p.Data)})
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}
