package oncekey

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncekey/oncekey/canonical"
)

// Registry maps tool names (registered activity names) to policies. It is safe for concurrent use.
// A tool without a policy is passed through untouched (the interceptor logs the first call of
// each such activity type).
type Registry struct {
	mu       sync.RWMutex
	policies map[string]Policy
	// results holds the declared result type of tools registered with a function value that
	// returns (T, error).
	results map[string]reflect.Type
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{policies: map[string]Policy{}, results: map[string]reflect.Type{}}
}

// Set registers p for an activity, given as its function value (the name is derived the way the
// Temporal SDK derives it: the function or method name) or as its registered name. The policy
// applies to the activity type of that name: for an activity registered under a name of its own
// (activity.RegisterOptions.Name), use SetAs with that name and the function value. A method is
// given as a method value (acts.Send), the name the SDK gives it when it registers a struct's
// methods; a method expression ((*Acts).Send) is taken as that method value.
//
// Set returns a *PolicyError when the policy is invalid, when an ArgsKey or Exclude field is not
// a JSON field of the activity's input type, or when such fields are given with a name instead of
// a function value (the input type is then unknown). It returns a *PolicyError with Field
// "activity", registering nothing, for a function value whose derived name cannot be the name its
// activity is registered under: a nil function, a function literal (the SDK derives "func1"…) or
// an instantiation of a generic function (the SDK derives "]" for every one); use SetAs with the
// name the activity is registered under.
func (r *Registry) Set(activity any, p Policy) error {
	name, fnType, err := activityName(activity, true)
	if err != nil {
		return err
	}
	return r.set(name, fnType, p)
}

// SetAs registers p under the registered activity name name for an activity registered with an
// explicit name (activity.RegisterOptions.Name), checking ArgsKey and Exclude fields against the
// input type of the function value fn. Only fn's type is read, so fn may be any function value
// of the activity's type, including those Set refuses (a function literal, an instantiation of a
// generic function, a typed nil function). It returns a *PolicyError like Set.
func (r *Registry) SetAs(name string, fn any, p Policy) error {
	if strings.TrimSpace(name) == "" {
		return &PolicyError{Field: "activity", Reason: "empty activity name"}
	}
	_, fnType, err := activityName(fn, false)
	if err != nil {
		return err
	}
	if fnType == nil {
		return &PolicyError{Tool: name, Field: "activity", Reason: "SetAs needs the activity's function value"}
	}
	return r.set(name, fnType, p)
}

func (r *Registry) set(name string, fnType reflect.Type, p Policy) error {
	if err := p.validate(name); err != nil {
		return err
	}
	if p.Key != nil {
		if err := p.Key.check(); err != nil {
			return &PolicyError{Tool: name, Field: "Key", Reason: err.Error()}
		}
	}
	check := func(field string, paths []string) error {
		if len(paths) == 0 {
			return nil
		}
		if fnType == nil {
			return &PolicyError{Tool: name, Field: field, Reason: "argument fields need the activity's function value, not its name, so they can be checked"}
		}
		for _, path := range paths {
			if err := checkPath(fnType, path); err != nil {
				return &PolicyError{Tool: name, Field: field, Reason: fmt.Sprintf("field %q: %v", path, err)}
			}
		}
		return nil
	}
	if p.Key != nil {
		if err := check("Key", p.Key.fields()); err != nil {
			return err
		}
	}
	if err := check("Exclude", p.Exclude); err != nil {
		return err
	}
	p.Exclude = slices.Clone(p.Exclude)
	r.mu.Lock()
	r.policies[name] = p.withDefaults()
	if t := resultType(fnType); t != nil {
		r.results[name] = t
	} else {
		delete(r.results, name)
	}
	r.mu.Unlock()
	return nil
}

// ResultType returns the declared result type T of the tool name when it was registered (Set or
// SetAs) with a function value returning (T, error). It returns false when the tool is unknown,
// was registered by name only (the type is then unknown), or returns only an error.
func (r *Registry) ResultType(tool string) (reflect.Type, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.results[tool]
	return t, ok
}

// resultType returns T for a function type returning (T, error), or nil.
func resultType(fn reflect.Type) reflect.Type {
	if fn == nil || fn.NumOut() != 2 {
		return nil
	}
	return fn.Out(0)
}

// Policy returns the policy registered for the tool name, with defaults applied.
func (r *Registry) Policy(tool string) (Policy, bool) {
	if r == nil {
		return Policy{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.policies[tool]
	return p, ok
}

// Tools returns the names of all registered tools.
func (r *Registry) Tools() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.policies))
	for k := range r.policies {
		out = append(out, k)
	}
	return out
}

// Key returns the printable operation key ("ok1_" + 64 lower-case hex digits) of op under policy
// p (StepKey when p.Key is nil): SHA-256 over the length-prefixed parts namespace, tenant, then
// the strategy's parts. It returns an error wrapping ErrNoKey, before anything is claimed, when a
// part is empty or only white space, an ArgsKey field is absent, null or blank, or an
// ExplicitKey function fails.
func Key(p Policy, op Operation) (string, error) {
	ks := p.Key
	if ks == nil {
		ks = StepKey()
	}
	return deriveKey(ks, op)
}

// Fingerprint returns the fingerprint of op under policy p: the lower-case hex SHA-256 of the
// canonical JSON (package canonical) of {"args": arguments minus p.Exclude, "tool": op.Tool,
// "version": p.Version}, where arguments is the single argument, or an array of them when there
// are several. It reads op.Args when called: compute it before the tool body runs, since a body
// may mutate a map or pointer argument. Arguments that cannot be encoded exactly (NaN, invalid
// UTF-8, a channel…) give an error wrapping a *canonical.Error that names the field path.
func Fingerprint(p Policy, op Operation) (string, error) {
	return fingerprint(op.Tool, p.Version, p.Exclude, op.Args)
}

var contextType = reflect.TypeOf((*context.Context)(nil)).Elem()

// activityName returns the activity name and the function type of an activity given as a name
// or a function value (see funcName). For a function value whose name cannot be an activity's
// registered name (see funcName), it returns a *PolicyError when strict, and the unusable name
// otherwise (SetAs, which is given the name).
func activityName(activity any, strict bool) (string, reflect.Type, error) {
	switch a := activity.(type) {
	case string:
		if strings.TrimSpace(a) == "" {
			return "", nil, &PolicyError{Field: "activity", Reason: "empty activity name"}
		}
		return a, nil, nil
	case nil:
		return "", nil, &PolicyError{Field: "activity", Reason: "nil activity"}
	}
	v := reflect.ValueOf(activity)
	if v.Kind() != reflect.Func {
		return "", nil, &PolicyError{Field: "activity", Reason: fmt.Sprintf("want a function or a name, got %T", activity)}
	}
	name, fnType, unusable := funcName(v)
	if unusable != "" && strict {
		return "", nil, &PolicyError{Field: "activity", Reason: unusable + ": the policy would never apply, or would apply to another activity. " +
			"Register the activity under a name of its own (activity.RegisterOptions.Name) and its policy with " +
			"Registry.SetAs(name, fn, policy) under that same name"}
	}
	return name, fnType, nil
}

// closureName matches the runtime name of a function literal: "pkg.Outer.func1", or
// "pkg.Outer.func1.2" and "pkg.Outer.Outer.func2.func3" when nested or inlined.
var closureName = regexp.MustCompile(`\.func\d+(\.\d+)*$`)

// funcName derives the activity name of the function value fn the way the Temporal SDK does when
// the activity is registered without a name of its own (getFunctionName in
// go.temporal.io/sdk/internal): the last dot-separated element of the function's runtime name,
// without the "-fm" suffix of a method value, so a bound method value acts.Send is "Send", as
// when the SDK registers the methods of a struct. It also returns fn's type as the activity sees
// it: for a method expression ((*Acts).Send, Acts.Send), the name is the method's, as for the
// method value, and the receiver is dropped from the parameters.
//
// unusable says why the derived name cannot be the name an activity is registered under, or is
// "": a nil function (no name), a function literal (the SDK derives "func1", "func2"…, which are
// neither stable nor unique), or an instantiation of a generic function (the runtime names it
// "pkg.Gen[...]", so the SDK derives "]" for every generic function alike). The SDK registers
// such functions under those names all the same; an activity registered with its own name
// (activity.RegisterOptions.Name) needs SetAs.
func funcName(fn reflect.Value) (name string, typ reflect.Type, unusable string) {
	typ = fn.Type()
	if fn.IsNil() {
		return "", typ, "the function is nil"
	}
	full := runtime.FuncForPC(fn.Pointer()).Name()
	elems := strings.Split(full, ".")
	name = strings.TrimSuffix(elems[len(elems)-1], "-fm")
	// symbol is the name inside its package: "Send", "(*Acts).Send", "Outer.func1".
	_, symbol, _ := strings.Cut(full[strings.LastIndex(full, "/")+1:], ".")
	switch {
	case strings.TrimSpace(name) == "":
		return "", typ, fmt.Sprintf("no activity name can be derived from the function (runtime name %q)", full)
	case strings.ContainsAny(name, "[]"):
		return "", typ, fmt.Sprintf("%s is an instantiation of a generic function, for which the Temporal SDK derives the name %q, "+
			"the same for every generic function", full, name)
	case !strings.HasSuffix(full, "-fm") && strings.Contains(symbol, ".") && closureName.MatchString(full):
		return "", typ, fmt.Sprintf("%s is a function literal (closure), for which the Temporal SDK derives the name %q, "+
			"which is neither stable nor unique", full, name)
	}
	if !strings.HasSuffix(full, "-fm") && isMethodExpression(symbol, typ) {
		ins := make([]reflect.Type, 0, typ.NumIn()-1)
		for i := 1; i < typ.NumIn(); i++ {
			ins = append(ins, typ.In(i))
		}
		outs := make([]reflect.Type, 0, typ.NumOut())
		for i := 0; i < typ.NumOut(); i++ {
			outs = append(outs, typ.Out(i))
		}
		typ = reflect.FuncOf(ins, outs, typ.IsVariadic())
	}
	return name, typ, ""
}

// isMethodExpression reports whether a function named symbol in its package ("(*Acts).Send",
// "Acts.Send") of type typ is a method expression: its first parameter is the receiver the
// name spells.
func isMethodExpression(symbol string, typ reflect.Type) bool {
	i := strings.LastIndex(symbol, ".")
	if i < 0 || typ.NumIn() == 0 {
		return false
	}
	recv, in := symbol[:i], typ.In(0)
	if strings.HasPrefix(recv, "(*") && strings.HasSuffix(recv, ")") {
		if in.Kind() != reflect.Pointer {
			return false
		}
		recv, in = recv[2:len(recv)-1], in.Elem()
	}
	// A generic type's runtime name is "G[...]"; its reflect name "G[pkg.T]".
	recv, _, _ = strings.Cut(recv, "[")
	base, _, _ := strings.Cut(in.Name(), "[")
	return base != "" && base == recv
}

// checkPath checks a dotted JSON path against the input parameters of fn.
func checkPath(fn reflect.Type, path string) error {
	var params []reflect.Type
	for i := 0; i < fn.NumIn(); i++ {
		if i == 0 && fn.In(0).Implements(contextType) {
			continue
		}
		params = append(params, fn.In(i))
	}
	segs := strings.Split(path, ".")
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("empty segment")
		}
	}
	switch len(params) {
	case 0:
		return fmt.Errorf("the activity takes no arguments")
	case 1:
		return walkType(params[0], segs)
	default:
		i, err := strconv.Atoi(segs[0])
		if err != nil || i < 0 || i >= len(params) {
			return fmt.Errorf("the activity takes %d arguments: start the path with an argument index 0..%d", len(params), len(params)-1)
		}
		return walkType(params[i], segs[1:])
	}
}

func walkType(t reflect.Type, segs []string) error {
	for _, seg := range segs {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == timeType {
			return fmt.Errorf("%q is inside a time.Time, which has no fields", seg)
		}
		if t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) {
			return nil // its own MarshalJSON decides the shape
		}
		switch t.Kind() {
		case reflect.Interface:
			return nil // anything may be inside
		case reflect.Map:
			switch t.Key().Kind() {
			case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			default:
				if !t.Key().Implements(textMarshalerType) {
					return fmt.Errorf("map key %s cannot be encoded", t.Key())
				}
			}
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			if _, err := strconv.Atoi(seg); err != nil {
				return fmt.Errorf("%q indexes a list: want a number", seg)
			}
			t = t.Elem()
		case reflect.Struct:
			f, ok := canonical.StructField(t, seg)
			if !ok {
				return fmt.Errorf("%s has no JSON field %q (JSON names are exact, as json tags spell them)", t, seg)
			}
			t = f
		default:
			return fmt.Errorf("%q is inside a %s, which has no fields", seg, t)
		}
	}
	return nil
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)
