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
