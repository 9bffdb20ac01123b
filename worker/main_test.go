package worker_test

import (
	"testing"

	"github.com/oncekey/oncekey/internal/testing/testenv"
)

// TestMain stops the Temporal dev server the package's tests started (testenv.Temporal), so that
// none is left running after `go test`.
func TestMain(m *testing.M) { testenv.Main(m) }
