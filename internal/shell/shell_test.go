package shell_test

import (
	"os/exec"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/shell"
)

// Every word, read back by bash, is the value itself, one argument; it holds no control
// character, no backtick and no unescaped dollar sign.
func TestWordRoundTripsThroughBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue // no shell argument can hold a NUL; checked below for what is printed
		}
		w := shell.Word(v)
		cmd := exec.Command(bash, "--noprofile", "--norc", "-c", "printf '%s' "+w)
		cmd.Env = []string{"LC_ALL=C.UTF-8"}
		got, err := cmd.Output()
		require.NoError(t, err, "%q as %s", v, w)
		require.Equal(t, v, string(got), "%q printed as %s", v, w)
		argc, err := exec.Command(bash, "--noprofile", "--norc", "-c", "set -- "+w+"; echo $#").Output()
		require.NoError(t, err)
		require.Equal(t, "1\n", string(argc), "%q as %s is one word", v, w)
	}
}

func TestWordPrintsNothingActive(t *testing.T) {
	for _, v := range shell.Hostile {
		w := shell.Word(v)
		require.True(t, utf8.ValidString(w), "%q as %q", v, w)
		require.NotContains(t, w, "`", "%q as %q", v, w)
		for _, r := range w {
			require.True(t, unicode.IsPrint(r), "%q as %q holds %U", v, w, r)
		}
		if strings.ContainsAny(v, "$`\\") || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) || !utf8.ValidString(v) {
			require.True(t, strings.HasPrefix(w, "$'"), "%q as %q", v, w)
			require.NotContains(t, w[1:], "$", "%q as %q", v, w)
		}
	}
	require.Equal(t, "acme", shell.Word("acme"))
	require.Equal(t, "'acme corp'", shell.Word("acme corp"))
	require.Equal(t, `'it'\''s'`, shell.Word("it's"))
	require.Equal(t, `$'\x60id\x60'`, shell.Word("`id`"))
	require.Equal(t, `$'\x24(id)'`, shell.Word("$(id)"))
	require.Equal(t, `$'a\x0ab'`, shell.Word("a\nb"))
}
