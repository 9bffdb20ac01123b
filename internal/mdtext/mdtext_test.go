package mdtext_test

import (
	"strings"
	"testing"

	"github.com/oncekey/oncekey/internal/mdtext"
	"github.com/oncekey/oncekey/internal/shell"
)

func TestTextEscapesMarkdownAndControls(t *testing.T) {
	for in, want := range map[string]string{
		"ticket for acme: printer on fire":  "ticket for acme: printer on fire",
		"step create_ticket of ok1_ab":      "step create_ticket of ok1_ab",
		"_lead trail_ a__b":                 `\_lead trail\_ a\_\_b`,
		"refund 120.00 EUR on order #42":    "refund 120.00 EUR on order #42",
		"**bold** _it_ `code`":              `\*\*bold\*\* \_it\_ \` + "`" + `code\` + "`",
		"[a](https://x) ![i](https://x/p)":  `\[a\]\(https://x\) \!\[i\]\(https://x/p\)`,
		"<img src=x onerror=alert(1)> &amp": `\<img src=x onerror=alert\(1\)\> \&amp`,
		"a\n\nb\r\tc":                       `a\\n\\nb\\r\\tc`,
		"bidi\u202eevil \x1b[31m bad\xff":   `bidi\\u202eevil \\x1b\[31m bad\\xff`,
		`back\slash`:                        `back\\slash`,
	} {
		if got := mdtext.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// No hostile value keeps a line break, a control or format character, or an unescaped active
// character.
func TestTextOfHostileValuesIsInert(t *testing.T) {
	for _, v := range shell.Hostile {
		got := mdtext.Text(v)
		for i := 0; i < len(got); i++ {
			c := got[i]
			if c == '\\' {
				i++ // an escape: the next byte is literal
				continue
			}
			intraword := c == '_' && i > 0 && i+1 < len(got) && isWord(got[i-1]) && isWord(got[i+1])
			if c < 0x20 || c == 0x7f || !intraword && strings.IndexByte("`*_[]()!<>|~&", c) >= 0 {
				t.Errorf("Text(%q) = %q keeps %q active", v, got, c)
			}
		}
		if strings.ContainsAny(got, "\u202e\u200b\u0085") {
			t.Errorf("Text(%q) = %q keeps a format character", v, got)
		}
	}
}

func isWord(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
