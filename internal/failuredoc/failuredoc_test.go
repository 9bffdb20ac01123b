package failuredoc

import "testing"

// TestBytesPinned pins the stored failure document. Records in every store hold it: changing a
// JSON name here is a BREAKING CHANGE.
func TestBytesPinned(t *testing.T) {
	for _, c := range []struct {
		doc  Doc
		want string
	}{
		{Doc{Message: "card declined", Type: "Declined", NonRetryable: true}, `{"message":"card declined","type":"Declined","non_retryable":true}`},
		{Doc{Message: "lease lost", Reason: "lease lost", EffectReference: "ch_1"}, `{"message":"lease lost","reason":"lease lost","effect_reference":"ch_1"}`},
		{Doc{Message: "", ResolvedBy: "receipt:charge"}, `{"message":"","resolved_by":"receipt:charge"}`},
	} {
		if got := string(c.doc.Bytes()); got != c.want {
			t.Errorf("Bytes() = %s, want %s", got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, ``},
		{`{"message":"m","reason":"r"}`, `m`},
		{`{"reason":"r"}`, `r`},
		{`{"message":"m","type":5}`, `m`},
		{`{}`, `{}`},
		{`not json`, `not json`},
	} {
		if got := Text([]byte(c.in)); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
