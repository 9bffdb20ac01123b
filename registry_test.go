package oncekey_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

type Address struct {
	Street string `json:"street"`
	City   string
}

type Meta struct {
	TraceID string `json:"trace_id"`
}

type BookInput struct {
	Meta
	Flight    string            `json:"flight"`
	Passenger *Address          `json:"passenger"`
	Seats     []Address         `json:"seats"`
	Extra     map[string]string `json:"extra"`
	Any       any               `json:"any"`
	When      time.Time         `json:"when"`
	Hidden    string            `json:"-"`
	GoName    string            `json:"json_name"`
	Count     int               `json:"count"`
}

func BookFlight(ctx context.Context, in BookInput) (string, error) { return in.Flight, nil }

func TransferFunds(ctx context.Context, from string, to *Address, amount int) error { return nil }

func NoArgs(ctx context.Context) error { return nil }

type tools struct{}

func (tools) SendEmail(ctx context.Context, in Meta) error { return nil }

func TestRegistrySetNames(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.NoError(t, r.Set(BookFlight, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, r.Set(tools{}.SendEmail, oncekey.Policy{Effect: oncekey.Idempotent}))
	require.NoError(t, r.Set("lookup_customer", oncekey.Policy{Effect: oncekey.ReadOnly}))
	require.ElementsMatch(t, []string{"BookFlight", "SendEmail", "lookup_customer"}, r.Tools())

	p, ok := r.Policy("BookFlight")
	require.True(t, ok)
	require.Equal(t, oncekey.Effectful, p.Effect)
	require.Equal(t, oncekey.DefaultLease, p.Lease)
	require.Equal(t, oncekey.DefaultRetention, p.Retention)
	require.NotNil(t, p.Key, "defaults to StepKey")
	_, ok = r.Policy("Unknown")
	require.False(t, ok)
	var nilReg *oncekey.Registry
	_, ok = nilReg.Policy("BookFlight")
	require.False(t, ok)
}

func TestRegistrySetChecksFields(t *testing.T) {
	t.Parallel()
	ok := []oncekey.Policy{
		{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("flight")},
		{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("passenger.street", "passenger.City", "seats.0.street")},
		{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("trace_id"), Exclude: []string{"trace_id"}}, // promoted from Meta
		{Effect: oncekey.Effectful, Exclude: []string{"extra.anything", "any.deep.path", "when", "json_name", "count"}},
	}
	for _, p := range ok {
		require.NoError(t, oncekey.NewRegistry().Set(BookFlight, p))
	}
	require.NoError(t, oncekey.NewRegistry().Set(TransferFunds, oncekey.Policy{Effect: oncekey.Effectful,
		Key: oncekey.ArgsKey("0", "1.street"), Exclude: []string{"2"}}))

	bad := []struct {
		activity any
		p        oncekey.Policy
		field    string
	}{
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("Flight")}, "Key"}, // Go name, not JSON name
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("flight_no")}, "Key"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"GoName"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"Hidden"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"passenger.zip"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"seats.first"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"flight.x"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"when.wall"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"flight..x"}}, "Exclude"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{""}}, "Exclude"},
		{TransferFunds, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("street")}, "Key"}, // needs an index
		{TransferFunds, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("3")}, "Key"},
		{NoArgs, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"x"}}, "Exclude"},
		{"BookFlight", oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("flight")}, "Key"}, // a name: type unknown
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey()}, "Key"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ExplicitKey(nil)}, "Key"},
		{BookFlight, oncekey.Policy{}, "Effect"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effect(9)}, "Effect"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Millisecond}, "Lease"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Retention: -time.Hour}, "Lease/Retention/Tombstone/MaxResultBytes"},
		// A live claim must not outlive its record: Retention at least Lease plus its renewal interval.
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Retention: 10 * time.Second}, "Retention"}, // the default 30s lease
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Minute}, "Retention"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Idempotent, Lease: 3 * time.Second, Retention: 3999 * time.Millisecond}, "Retention"},
		{BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Lease: 8 * 24 * time.Hour}, "Retention"}, // the default 7-day retention
		{"", oncekey.Policy{Effect: oncekey.Effectful}, "activity"},
		{nil, oncekey.Policy{Effect: oncekey.Effectful}, "activity"},
		{42, oncekey.Policy{Effect: oncekey.Effectful}, "activity"},
	}
	for i, c := range bad {
		r := oncekey.NewRegistry()
		err := r.Set(c.activity, c.p)
		var pe *oncekey.PolicyError
		require.True(t, errors.As(err, &pe), "case %d: %v", i, err)
		require.Equal(t, c.field, pe.Field, "case %d: %v", i, err)
		require.Empty(t, r.Tools(), "case %d: a refused policy is not registered", i)
	}
}

// The shortest Retention a Lease allows is accepted.
func TestRegistryAcceptsMinRetention(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.Equal(t, 4*time.Second, oncekey.MinRetention(3*time.Second))
	require.NoError(t, r.Set(BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Lease: 3 * time.Second, Retention: 4 * time.Second}))
	require.NoError(t, r.Set("Other", oncekey.Policy{Effect: oncekey.Effectful, Retention: oncekey.MinRetention(oncekey.DefaultLease)}))
}

func TestRegistryKeepsItsOwnExcludeList(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	exclude := []string{"trace_id"}
	require.NoError(t, r.Set(BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Exclude: exclude}))
	exclude[0] = "flight"
	p, _ := r.Policy("BookFlight")
	require.Equal(t, []string{"trace_id"}, p.Exclude)
}

// TestRegistryPolicyFingerprint runs a registered policy end to end over decoded arguments.
func TestRegistryPolicyFingerprint(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.NoError(t, r.Set(BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("flight"),
		Exclude: []string{"trace_id"}, Version: "2"}))
	p, _ := r.Policy("BookFlight")
	a, b := baseOp(), baseOp()
	a.Tool, b.Tool = "BookFlight", "BookFlight"
	a.Args = []any{BookInput{Meta: Meta{TraceID: "t1"}, Flight: "LH 400"}}
	b.Args = []any{BookInput{Meta: Meta{TraceID: "t2"}, Flight: "LH 400"}}
	require.Equal(t, mustKey(t, p, a), mustKey(t, p, b))
	require.Equal(t, mustFingerprint(t, p, a), mustFingerprint(t, p, b))
	b.Args = []any{BookInput{Flight: "LH 400", Count: 2}}
	require.Equal(t, mustKey(t, p, a), mustKey(t, p, b), "same flight: one operation")
	require.NotEqual(t, mustFingerprint(t, p, a), mustFingerprint(t, p, b), "with other arguments: rejected, not replayed")
}

func TestRegistrySetAs(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.NoError(t, r.SetAs("book_flight", BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("flight")}))
	_, ok := r.Policy("book_flight")
	require.True(t, ok)
	_, ok = r.Policy("BookFlight")
	require.False(t, ok)

	var pe *oncekey.PolicyError
	require.ErrorAs(t, r.SetAs("book_flight", BookFlight, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("Flight")}), &pe)
	require.Equal(t, "Key", pe.Field)
	require.ErrorAs(t, r.SetAs(" ", BookFlight, oncekey.Policy{Effect: oncekey.Effectful}), &pe)
	require.ErrorAs(t, r.SetAs("x", "BookFlight", oncekey.Policy{Effect: oncekey.Effectful}), &pe)
	require.Equal(t, "activity", pe.Field)
}

func TestRegistryResultType(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.NoError(t, r.Set(BookFlight, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, r.SetAs("book_flight", BookFlight, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, r.Set(TransferFunds, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, r.Set("ByName", oncekey.Policy{Effect: oncekey.Effectful}))

	for _, name := range []string{"BookFlight", "book_flight"} {
		typ, ok := r.ResultType(name)
		require.True(t, ok, name)
		require.Equal(t, reflect.TypeFor[string](), typ, name)
	}
	_, ok := r.ResultType("TransferFunds")
	require.False(t, ok, "returns only an error")
	_, ok = r.ResultType("ByName")
	require.False(t, ok, "registered by name: the type is unknown")
	_, ok = r.ResultType("Missing")
	require.False(t, ok)

	// Registering the same tool again by name forgets the type it no longer knows.
	require.NoError(t, r.Set("BookFlight", oncekey.Policy{Effect: oncekey.Effectful}))
	_, ok = r.ResultType("BookFlight")
	require.False(t, ok)
	var nilReg *oncekey.Registry
	_, ok = nilReg.ResultType("BookFlight")
	require.False(t, ok)
}

// GenericTool is a generic activity: the runtime names its instantiations "pkg.GenericTool[...]".
func GenericTool[T any](ctx context.Context, in T) (string, error) { return "", nil }

// OtherGenericTool is another generic activity; the Temporal SDK derives "]" for both.
func OtherGenericTool[T any](ctx context.Context, in T) error { return nil }

// LiteralTool is a package-level function literal: the runtime names it "pkg.init.func1".
var LiteralTool = func(ctx context.Context, in Meta) error { return nil }

// func7 is a plain function that happens to be named like a function literal.
func func7(ctx context.Context, in Meta) error { return nil }

type ptrTools struct{}

func (*ptrTools) Transfer(ctx context.Context, from string, to *Address, amount int) (int, error) {
	return amount, nil
}

func (ptrTools) Notify(ctx context.Context, in Meta) error { return nil }

// TestRegistrySetRefusesUnnamedFunctions: a function value whose derived name cannot be the name
// its activity is registered under is refused with a *PolicyError pointing to SetAs, and nothing
// is registered; SetAs with the registered name takes each of them.
func TestRegistrySetRefusesUnnamedFunctions(t *testing.T) {
	t.Parallel()
	closure := func(ctx context.Context, in Meta) error { return nil }
	nested := func() func(context.Context, Meta) error {
		return func(ctx context.Context, in Meta) error { return nil }
	}()
	var nilFunc func(context.Context, Meta) error
	cases := []struct {
		name string
		fn   any
		want string
	}{
		{"generic", GenericTool[Meta], "generic"},
		{"other generic", OtherGenericTool[Meta], "generic"},
		{"generic of another type", GenericTool[BookInput], "generic"},
		{"closure", closure, "function literal"},
		{"nested closure", nested, "function literal"},
		{"package-level closure", LiteralTool, "function literal"},
		{"nil function", nilFunc, "nil"},
	}
	for _, c := range cases {
		r := oncekey.NewRegistry()
		err := r.Set(c.fn, oncekey.Policy{Effect: oncekey.Effectful})
		var pe *oncekey.PolicyError
		require.ErrorAs(t, err, &pe, c.name)
		require.Equal(t, "activity", pe.Field, c.name)
		require.Contains(t, pe.Reason, c.want, c.name)
		require.Contains(t, pe.Reason, "SetAs", c.name)
		require.Empty(t, r.Tools(), "%s: nothing registered", c.name)

		require.NoError(t, r.SetAs("tool_"+c.name, c.fn, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"trace_id"}}), c.name)
		require.Equal(t, []string{"tool_" + c.name}, r.Tools(), c.name)
		var pe2 *oncekey.PolicyError
		require.ErrorAs(t, r.SetAs("tool_"+c.name, c.fn, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"no_such_field"}}), &pe2,
			"%s: SetAs still checks fields against the function's type", c.name)
		require.Equal(t, "Exclude", pe2.Field, c.name)
	}
	typ, ok := func() (reflect.Type, bool) {
		r := oncekey.NewRegistry()
		require.NoError(t, r.SetAs("generic_tool", GenericTool[BookInput], oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("flight")}))
		return r.ResultType("generic_tool")
	}()
	require.True(t, ok)
	require.Equal(t, reflect.TypeFor[string](), typ)

	// A plain function named like a function literal is not one.
	r := oncekey.NewRegistry()
	require.NoError(t, r.Set(func7, oncekey.Policy{Effect: oncekey.Effectful}))
	require.Equal(t, []string{"func7"}, r.Tools())
}

// TestRegistrySetMethodExpression: a method expression names the method, as the method value
// does, and its receiver is not an argument of the activity.
func TestRegistrySetMethodExpression(t *testing.T) {
	t.Parallel()
	p := oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("0", "1.street"), Exclude: []string{"2"}}
	for _, fn := range []any{(*ptrTools).Transfer, (&ptrTools{}).Transfer} {
		r := oncekey.NewRegistry()
		require.NoError(t, r.Set(fn, p))
		require.Equal(t, []string{"Transfer"}, r.Tools())
		typ, ok := r.ResultType("Transfer")
		require.True(t, ok)
		require.Equal(t, reflect.TypeFor[int](), typ)
		var pe *oncekey.PolicyError
		err := r.Set(fn, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"3"}})
		require.ErrorAs(t, err, &pe)
		require.Contains(t, pe.Reason, "takes 3 arguments", "the receiver is not counted")
		require.NoError(t, r.SetAs("transfer", fn, p))
	}
	for _, fn := range []any{ptrTools.Notify, (*ptrTools).Notify, ptrTools{}.Notify} {
		r := oncekey.NewRegistry()
		require.NoError(t, r.Set(fn, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"trace_id"}}))
		require.Equal(t, []string{"Notify"}, r.Tools())
	}
}
