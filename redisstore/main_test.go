package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The store starts no goroutines of its own; every client and server a test starts is closed
// by the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
