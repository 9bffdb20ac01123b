// Package shelltest reads printed commands back the way a shell would, for tests of the places
// that print them. It runs bash; it is for tests only.
package shelltest

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Args returns the words bash makes of cmd (no expansion beyond quoting runs anything: the
// words are only printed). It skips the test when bash is missing and fails it when bash cannot
// read cmd.
func Args(t testing.TB, cmd string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to read the command with")
	}
	c := exec.Command(bash, "--noprofile", "--norc", "-c", "set -f; set -- "+cmd+"\nprintf '%s\\0' \"$@\"")
	c.Env = []string{"LC_ALL=C.UTF-8", "PATH=/nonexistent"}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("bash cannot read %q: %v %s", cmd, err, stderr.String())
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}
