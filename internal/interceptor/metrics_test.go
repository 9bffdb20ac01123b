package interceptor_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/internal/testing/metricstest"
	"github.com/oncekey/oncekey/metrics"
)

// Each claimed call counts once by tool and outcome and records its claim latency through the
// SDK's metrics handler; no series is tagged with an operation key, and the tenant only when
// asked for.
func TestMetricsCountCallsByToolAndOutcome(t *testing.T) {
	for _, withTenant := range []bool{false, true} {
		t.Run(map[bool]string{false: "no tenant tag", true: "tenant tag"}[withTenant], func(t *testing.T) {
			h := metricstest.New()
			ds := newDownstream()
			s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
				suite: func(s *testsuite.WorkflowTestSuite) { s.SetMetricsHandler(h) },
				opts:  func(o *interceptor.Options) { o.MetricsTenantTag = withTenant },
			})
			out := s.run(t, workflowInput{Tenant: "acme", Calls: []stepCall{
				{StepID: "s1", Tool: "CreateTicket", Req: req1},
				{StepID: "s1", Tool: "CreateTicket", Req: req1},
				{Tool: "LookupCustomer", Req: req1},
			}})
			require.Equal(t, out[0].Ticket, out[1].Ticket)
			effects, _ := ds.counts()
			require.Equal(t, 1, effects, "the downstream saw one ticket")

			tags := func(tool string, kv ...string) map[string]string {
				m := map[string]string{metrics.TagTool: tool}
				if withTenant {
					m[metrics.TagTenant] = "acme"
				}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i]] = kv[i+1]
				}
				return m
			}
			require.EqualValues(t, 1, h.Sum(metrics.ToolCalls, tags("CreateTicket", "outcome", "applied")))
			require.EqualValues(t, 1, h.Sum(metrics.ToolCalls, tags("CreateTicket", "outcome", "replayed")))
			require.EqualValues(t, 2, h.Sum(metrics.ToolCalls, nil), "ReadOnly calls are not claimed, so not counted: %v", h.Names())
			require.Len(t, h.Records(metrics.ClaimLatency, tags("CreateTicket")), 2, "one claim latency per claimed call")
			for _, name := range h.Names() {
				require.NotContains(t, name, oncekey.KeyPrefix, "never tagged by operation key")
				if !withTenant && strings.HasPrefix(name, "oncekey_") {
					require.NotContains(t, name, "tenant=", "no tenant tag unless asked")
				}
			}
		})
	}
}
