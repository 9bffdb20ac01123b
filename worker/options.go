package worker

import (
	tinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/oncekey/oncekey/internal/interceptor"
)

// Options configures oncekey on a worker (NewPlugin, Register, WorkerOptions, NewInterceptor):
// the Store, the Registry of tool policies, the tenant function, retention and lease defaults,
// metrics, tracing and the reconciliation and approval settings. A zero field means its
// documented default; Store and Registry are required. Every field is described in
// docs/configuration.md.
type Options = interceptor.Options

// ConfigError names an Options field that is invalid and why; errors.Is(err, ErrConfig) holds.
type ConfigError = interceptor.ConfigError

// ErrConfig is wrapped by every *ConfigError.
var ErrConfig = interceptor.ErrConfig

// TenantInfo is what Options.Tenant is given to choose a call's tenant from.
type TenantInfo = interceptor.TenantInfo

// Event is one claim-path event given to Options.OnEvent.
type Event = interceptor.Event

// Tracer records oncekey's spans (Options.Tracer); package oncekeyotel has one for OpenTelemetry.
type Tracer = interceptor.Tracer

// SpanStart and SpanEnd are what a Tracer is given when one of oncekey's spans starts and ends.
type (
	SpanStart = interceptor.SpanStart
	SpanEnd   = interceptor.SpanEnd
)

// The spans oncekey records (SpanStart.Name).
const (
	SpanClaim    = interceptor.SpanClaim
	SpanReplay   = interceptor.SpanReplay
	SpanBody     = interceptor.SpanBody
	SpanComplete = interceptor.SpanComplete
)

// DefaultEscalationTimeout is how long a reconciliation waits for a decision when
// Options.EscalationTimeout is zero: 10 minutes.
const DefaultEscalationTimeout = interceptor.DefaultEscalationTimeout

// NewInterceptor returns oncekey's worker interceptor, for a worker.Options.Interceptors set by
// hand (NewPlugin and WorkerOptions install it for you); call Register on the worker too. It
// returns a *ConfigError for invalid options.
func NewInterceptor(opts Options) (tinterceptor.WorkerInterceptor, error) {
	return interceptor.New(opts)
}
