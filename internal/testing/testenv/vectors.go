package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// VectorsDir returns the directory of the shared canonical-encoding test vectors: ONCEKEY_VECTORS
// if set, else ../shared/vectors beside the repository (the project's layout), else
// /work/shared/vectors. A missing directory skips the test, or fails it when CI is set.
func VectorsDir(tb testing.TB) string {
	tb.Helper()
	var tried []string
	if d := os.Getenv("ONCEKEY_VECTORS"); d != "" {
		tried = append(tried, d)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		// file is <repo>/internal/testing/testenv/vectors.go.
		repo := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file))))
		tried = append(tried, filepath.Join(repo, "..", "shared", "vectors"))
	}
	tried = append(tried, filepath.Join("/work", "shared", "vectors"))
	for _, d := range tried {
		if _, err := os.Stat(filepath.Join(d, "canonical.json")); err == nil {
			return d
		}
	}
	Missing(tb, "canonical test vectors: none of %v holds canonical.json (set ONCEKEY_VECTORS)", tried)
	return ""
}
