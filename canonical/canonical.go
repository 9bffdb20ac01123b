package canonical

import (
	"encoding/json"

	"github.com/gowebpki/jcs"
)

// Transform returns the canonical form of the JSON text in jsonText.
//
// TEMPORARY: delegates to gowebpki/jcs until the project's encoder lands.
func Transform(jsonText []byte) ([]byte, error) { return jcs.Transform(jsonText) }

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Transform(b)
}
