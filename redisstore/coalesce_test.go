package redisstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/storeload"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/redisstore"
)

// The conformance suite with every claim and fenced write sent in a pipeline.
func TestConformanceCoalescedPipelines(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		s, _ := setup(t, &redisstore.Options{Coalesce: true})
		s.AlwaysCoalesce()
		return s
	})
}

// The conformance suite with Options.Coalesce as a user sets it.
func TestConformanceCoalesced(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		s, _ := setup(t, &redisstore.Options{Coalesce: true})
		return s
	})
}

// Many concurrent claims and completions of new keys: every one acquired and stored, each with
// its own answer, in fewer pipelines than calls.
func TestCoalescedManyClients(t *testing.T) {
	s, _ := setup(t, &redisstore.Options{Coalesce: true})
	storeload.ClaimComplete(t, s, "many", 32, 20)
	cp, cc, fp, fc := s.CoalesceStats()
	t.Logf("claims: %d pipelines of %d calls; fenced writes: %d of %d", cp, cc, fp, fc)
	require.Greater(t, cc, cp, "no claims went together")
}
