package oncekey_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/oncekey/oncekey"

// layers is the layering docs/design.md draws ("Map of the code"), lowest first: a package
// (a directory below the repository, "." for the root; an entry covers its subdirectories) may
// import a package of a lower layer, or one under its own entry, and nothing else. The test
// helpers (internal/testing) and the development tools (internal/dev) are not layered: see
// TestLayering.
var layers = [][]string{
	{"canonical", "metrics", "internal/shell", "internal/failure", "internal/textcheck", "internal/errdetail", "internal/mdtext", "internal/failuredoc", "internal/coalesce", "internal/httpproof", "internal/jsondoc", "internal/wire", "internal/argsdoc"},
	{"oncekeystore", "decisionsig"},
	{"memstore", "pgstore", "redisstore", "oncekeystore/storetest", "oncekeystore/storemock"},
	{"."},
	{"agent", "adapters", "internal/approvaledit"},
	{"reconcile"},
	{"internal/decision"},
	{"internal/activities", "internal/decisiontext"},
	{"internal/interceptor", "internal/workflows"},
	{"worker"},
	{"oncekeyotel", "oncekeytest"},
	{"cmd", "internal/faults", "examples"},
}

// TestLayering checks every non-test Go file's oncekey imports against layers, and that only
// tests import internal/testing and only tests, benchmark commands and examples import
// internal/dev. A new package must be given its layer here and in docs/design.md.
func TestLayering(t *testing.T) {
	type entry struct {
		dir   string
		layer int
	}
	find := func(dir string) (entry, bool) {
		best, ok := entry{}, false
		for i, l := range layers {
			for _, e := range l {
				if (dir == e || strings.HasPrefix(dir, e+"/")) && (!ok || len(e) > len(best.dir)) {
					best, ok = entry{e, i}, true
				}
			}
		}
		return best, ok
	}
	under := func(dir, tree string) bool { return dir == tree || strings.HasPrefix(dir, tree+"/") }
	var bad []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		from, layered := find(dir)
		tool := under(dir, "internal/testing") || under(dir, "internal/dev")
		if !layered && !tool {
			bad = append(bad, dir+": not in the layering (add it to layers and to docs/design.md)")
			return nil
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if path != modulePath && !strings.HasPrefix(path, modulePath+"/") {
				continue
			}
			to := strings.TrimPrefix(strings.TrimPrefix(path, modulePath), "/")
			if to == "" {
				to = "."
			}
			switch {
			case under(to, "internal/testing"):
				if !under(dir, "internal/testing") {
					bad = append(bad, p+" imports "+to+": only tests may import internal/testing")
				}
				continue
			case under(to, "internal/dev"):
				if !tool && !under(dir, "examples") && !strings.HasSuffix(dir, "/internal/benchcmd") {
					bad = append(bad, p+" imports "+to+": only tests, examples and benchmark commands may import internal/dev")
				}
				continue
			case tool:
				continue
			}
			target, ok := find(to)
			switch {
			case !ok:
				bad = append(bad, p+" imports "+to+", which is not in the layering")
			case target.dir == from.dir:
			case target.layer >= from.layer:
				bad = append(bad, p+" (layer "+strconv.Itoa(from.layer)+") imports "+to+" (layer "+strconv.Itoa(target.layer)+")")
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "imports against the layering of docs/design.md")
}

// TestStoresLinkNoTemporal checks what docs/design.md promises store authors: the store contract
// and the stores build without the Temporal SDK or API (nor anything else of oncekey's engine).
func TestStoresLinkNoTemporal(t *testing.T) {
	for _, pkg := range []string{"./oncekeystore", "./memstore", "./pgstore", "./oncekeystore/storetest", "./oncekeystore/storemock"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		for _, dep := range strings.Fields(string(out)) {
			require.False(t, strings.HasPrefix(dep, "go.temporal.io/") || dep == modulePath, "%s links %s", pkg, dep)
		}
	}
}
