package oncekey

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncekey/oncekey/canonical"
	"github.com/oncekey/oncekey/internal/jsondoc"
	"github.com/oncekey/oncekey/oncekeystore"
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
	// inputs holds the input type of tools registered with a function value taking exactly one
	// argument after the context (or with SetTool).
	inputs map[string]reflect.Type
	// routes holds the Route of activity types that carry many tools.
	routes map[string]Route
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{policies: map[string]Policy{}, results: map[string]reflect.Type{}, inputs: map[string]reflect.Type{},
		routes: map[string]Route{}}
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
	fnType, err := namedFunction("SetAs", name, fn)
	if err != nil {
		return err
	}
	return r.set(name, fnType, p)
}

// namedFunction returns the type of fn, the function value of the activity registered under
// name, for SetAs and RouteAs (method): a *PolicyError when name is blank or fn gives no type.
func namedFunction(method, name string, fn any) (reflect.Type, error) {
	if strings.TrimSpace(name) == "" {
		return nil, &PolicyError{Field: "activity", Reason: "empty activity name"}
	}
	_, fnType, err := activityName(fn, false)
	if err != nil {
		return nil, err
	}
	if fnType == nil {
		return nil, &PolicyError{Tool: name, Field: "activity", Reason: method + " needs the activity's function value"}
	}
	return fnType, nil
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
	p.Previous = slices.Clone(p.Previous)
	r.mu.Lock()
	r.policies[name] = p.withDefaults()
	if t := resultType(fnType); t != nil {
		r.results[name] = t
	} else {
		delete(r.results, name)
	}
	if t := inputType(fnType); t != nil {
		r.inputs[name] = t
	} else {
		delete(r.inputs, name)
	}
	r.mu.Unlock()
	return nil
}

// SetTool registers p for the tool name whose input (its arguments document) is of type In: a
// tool behind an activity type that carries many tools (see Registry.Route), or any tool
// registered without its function. ArgsKey and Exclude paths are checked against In, and In
// gives the tool's input schema (Registry.Definitions). It returns a *PolicyError like Set.
func SetTool[In any](r *Registry, name string, p Policy) error {
	if strings.TrimSpace(name) == "" {
		return &PolicyError{Field: "activity", Reason: "empty tool name"}
	}
	return r.set(name, reflect.TypeFor[func(context.Context, In) error](), p)
}

// inputType returns the one input type of a function type after an optional context, or nil.
func inputType(fn reflect.Type) reflect.Type {
	if fn == nil {
		return nil
	}
	var ins []reflect.Type
	for i := 0; i < fn.NumIn(); i++ {
		if i == 0 && fn.In(0).Implements(contextType) {
			continue
		}
		ins = append(ins, fn.In(i))
	}
	if len(ins) != 1 {
		return nil
	}
	return ins[0]
}

// InputType returns the input type of the tool name: the one argument after the context of the
// function it was registered with (Set, SetAs), or the type given to SetTool. It returns false
// when the tool is unknown, was registered by name only, or takes no argument or several.
func (r *Registry) InputType(tool string) (reflect.Type, bool) {
	return lookup(r, func(r *Registry) map[string]reflect.Type { return r.inputs }, tool)
}

// Route says how to tell apart the tools one activity type carries: an MCP proxy activity
// (CallMcpTool{Toolset, Tool, Args}), a dynamic activity, any activity whose arguments name the
// tool to run. Each tool it names then has its own policy (registered under the tool's name with
// Set, SetAs or SetTool), operation key, fingerprint, retry treatment and reconciliation.
//
// Paths are dotted paths of JSON member names in the activity's arguments document: the names
// the input's json tags spell ("tool_name", not "ToolName"), exactly. A call in which a path
// names nothing is never keyed: Registry.Resolve returns a *RouteError, and the interceptor
// fails the call (non-retryable, ErrTypeConfig) before anything is claimed.
type Route struct {
	// Args is the dotted JSON path of the tool's own arguments inside the activity's arguments
	// document, e.g. "arguments" for an input {"tool_name": …, "arguments": {…}}; "" means the
	// whole document. Keys, fingerprints, Exclude and ArgsKey paths of a routed tool address that
	// part, so fields of the envelope (a call ID the framework makes up per proposal) are not
	// part of the call's identity. A document with nothing at Args is a *RouteError (a member
	// that is there and null gives the arguments null), except where the Route was given the
	// activity's function and the Args path ends at a struct field tagged omitempty or omitzero:
	// the encoding leaves that member out of a call with empty (nil or {}) arguments, so an
	// absent member there is the arguments null, and a call with {} and one with nil are one
	// call.
	Args string

	// Fallback is the policy of a call whose tool has no policy: the Route named a tool nobody
	// registered. A zero Effect means Effectful, the safe default for tools nobody classified:
	// an MCP server's annotations may suggest a class, never grant one. Its Exclude and ArgsKey
	// paths address the tool's arguments and are not checked (their type is unknown). The
	// interceptor logs at Warn the first call of each tool that gets it. A call the Route cannot
	// name gets no policy at all: it is a *RouteError.
	Fallback Policy

	// Tool names the tool of one call from the activity's arguments document (canonical JSON, see
	// Operation.ArgsJSON). ok false, or a blank name, means the call cannot be named: a
	// *RouteError. It runs in workflow code as well as on the worker, so it must be deterministic
	// and must not block. Set ToolPaths or Tool, not both: ToolPaths is checked against the
	// activity's input type where Registry.Route is given the activity's function.
	Tool func(args json.RawMessage) (tool string, ok bool)

	// ToolPaths are the dotted JSON paths of the strings that name the tool, joined with "."
	// ({"toolset", "tool"} names {"toolset":"files","tool":"delete"} "files.delete"). A path that
	// is absent, not a string or blank in a call is a *RouteError naming the path and the members
	// the arguments have.
	ToolPaths []string

	// result is the routed activity's result type, set by Registry.Route when it is given the
	// activity's function value.
	result reflect.Type
	// typed is true when the Route was given the activity's function value; argsOmittable when,
	// besides, the Args path ends at a struct field tagged omitempty or omitzero.
	typed, argsOmittable bool
}

// ToolAt returns a Route.Tool function that names the tool by the strings at the dotted JSON
// paths of the arguments document, joined with "." (ToolAt("Toolset", "Tool") names
// {"Toolset":"files","Tool":"delete"} "files.delete"). A path that is absent, not a string or
// blank makes the call unrecognised (a *RouteError). Route.ToolPaths does the same and is
// checked at registration, and its errors name the path: prefer it.
func ToolAt(paths ...string) func(args json.RawMessage) (string, bool) {
	paths = slices.Clone(paths)
	return func(args json.RawMessage) (string, bool) {
		doc, err := jsondoc.Decode(args)
		if err != nil || len(paths) == 0 {
			return "", false
		}
		parts := make([]string, 0, len(paths))
		for _, p := range paths {
			v, ok := jsondoc.Lookup(doc, p)
			s, isString := v.(string)
			if !ok || !isString || blank(s) {
				return "", false
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "."), true
	}
}

// Route registers rt for an activity type that carries many tools, given like Set's activity: as
// its function value (the name derived as the Temporal SDK derives it), or as its registered
// name. A Route replaces any Route and is consulted before any policy registered under the same
// name.
//
// Given the function value, Route checks rt.ToolPaths and rt.Args against the activity's input
// type: each must name a JSON member of it (as its json tags spell them), and a tool path a
// string. Given a name, the input type is unknown, and a path that does not resolve is found at
// the first call (a *RouteError, before anything is claimed). Given the function value of an
// activity returning (T, error), T is also the result type of every tool the Route carries
// (Registry.ResultTypeOf): a resolution of a routed tool's unknown outcome must decode into it.
//
// It returns a *PolicyError when the activity is blank or its function value cannot give its
// name (see Set), when neither or both of rt.ToolPaths and rt.Tool are set, when a path has an
// empty segment or does not resolve in the input type (Reason names the path and the members
// the type has), or when rt.Fallback is invalid.
func (r *Registry) Route(activity any, rt Route) error {
	activityType, fnType, err := activityName(activity, true)
	if err != nil {
		return err
	}
	return r.route(activityType, fnType, rt)
}

// RouteAs registers rt under the registered activity name name for an activity registered with
// an explicit name (activity.RegisterOptions.Name), checking its paths against the input type of
// the function value fn as Route does. Only fn's type is read (see SetAs). It returns a
// *PolicyError like Route.
func (r *Registry) RouteAs(name string, fn any, rt Route) error {
	fnType, err := namedFunction("RouteAs", name, fn)
	if err != nil {
		return err
	}
	return r.route(name, fnType, rt)
}

func (r *Registry) route(activityType string, fnType reflect.Type, rt Route) error {
	switch {
	case rt.Tool == nil && len(rt.ToolPaths) == 0:
		return &PolicyError{Tool: activityType, Field: "Route.ToolPaths", Reason: "is required: the JSON path of the member that names the tool " +
			"(ToolPaths: []string{\"tool_name\"}, for instance), or a Route.Tool function"}
	case rt.Tool != nil && len(rt.ToolPaths) > 0:
		return &PolicyError{Tool: activityType, Field: "Route.Tool", Reason: "set Route.ToolPaths or Route.Tool, not both"}
	}
	rt.ToolPaths = slices.Clone(rt.ToolPaths)
	if err := checkRoute(activityType, fnType, rt); err != nil {
		return err
	}
	rt.result = resultType(fnType)
	rt.typed = fnType != nil
	rt.argsOmittable = rt.typed && rt.Args != "" && omittable(fnType, rt.Args)
	if rt.Fallback.Effect == 0 {
		rt.Fallback.Effect = Effectful
	}
	if err := rt.Fallback.validate(activityType); err != nil {
		return err
	}
	if rt.Fallback.Key != nil {
		if err := rt.Fallback.Key.check(); err != nil {
			return &PolicyError{Tool: activityType, Field: "Route.Fallback.Key", Reason: err.Error()}
		}
	}
	rt.Fallback = rt.Fallback.withDefaults()
	rt.Fallback.Exclude = slices.Clone(rt.Fallback.Exclude)
	r.mu.Lock()
	r.routes[activityType] = rt
	r.mu.Unlock()
	return nil
}

// Routed reports whether activityType has a Route.
func (r *Registry) Routed(activityType string) bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.routes[activityType] // no copy of the Route: both sides ask this on every call
	return ok
}

// Resolved is one call as the Registry names it: its tool, the policy that applies, and the
// tool's arguments document.
type Resolved struct {
	// Tool is the tool's name: the activity type, or the name the Route gave it.
	Tool   string
	Policy Policy
	// Args is the tool's arguments document in canonical JSON (the part at Route.Args for a routed
	// call).
	Args json.RawMessage
	// Fallback is true when the policy is the Route's Fallback.
	Fallback bool
}

// Resolve names the tool of one call of activityType whose arguments document (canonical JSON,
// see CanonicalArgs) is args, and returns its policy. An activity type without a Route is its own
// tool and has the policy registered under its name; ok is false when it has none. For an
// activity type with a Route, the call has the policy of the tool the Route names, else (a tool
// without a policy) the Route's Fallback, so ok is true. It returns an error when args is not
// JSON or has no canonical form, and a *RouteError when the Route names no tool for the call or
// Route.Args names nothing in it: such a call is never keyed.
func (r *Registry) Resolve(activityType string, args json.RawMessage) (Resolved, bool, error) {
	if r == nil {
		return Resolved{}, false, nil
	}
	r.mu.RLock()
	rt, routed := r.routes[activityType]
	r.mu.RUnlock()
	doc, err := canonical.Transform(args)
	if err != nil {
		return Resolved{}, false, fmt.Errorf("oncekey: arguments of %s: %w", activityType, err)
	}
	if !routed {
		p, ok := r.Policy(activityType)
		return Resolved{Tool: activityType, Policy: p, Args: doc}, ok, nil
	}
	d, err := jsondoc.Decode(doc)
	if err != nil {
		return Resolved{}, false, fmt.Errorf("oncekey: arguments of %s: %w", activityType, err)
	}
	tool, err := rt.toolOf(activityType, doc, d)
	if err != nil {
		return Resolved{}, false, err
	}
	out := Resolved{Tool: tool, Policy: rt.Fallback, Fallback: true, Args: doc}
	if p, ok := r.Policy(tool); ok {
		out.Policy, out.Fallback = p, false
	}
	if rt.Args != "" {
		v, err := rt.argsOf(activityType, d)
		if err != nil {
			return Resolved{}, false, err
		}
		if out.Args, err = canonical.Marshal(v); err != nil {
			return Resolved{}, false, fmt.Errorf("oncekey: arguments of %s: %w", activityType, err)
		}
	}
	return out, true, nil
}

// ResultType returns the declared result type T of the tool name when it was registered (Set or
// SetAs) with a function value returning (T, error). It returns false when the tool is unknown,
// was registered by name only (the type is then unknown), or returns only an error.
func (r *Registry) ResultType(tool string) (reflect.Type, bool) {
	return lookup(r, func(r *Registry) map[string]reflect.Type { return r.results }, tool)
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
	return lookup(r, func(r *Registry) map[string]Policy { return r.policies }, tool)
}

// lookup returns the entry for tool of the map of r that m picks, read under r's lock; the zero
// value and false for a nil r or no entry.
func lookup[V any](r *Registry, m func(*Registry) map[string]V, tool string) (V, bool) {
	if r == nil {
		var zero V
		return zero, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := m(r)[tool]
	return v, ok
}

// Tools returns the names of all registered tools, in no particular order.
func (r *Registry) Tools() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Collect(maps.Keys(r.policies))
}

// Key returns the printable operation key ("ok1_" + 64 lower-case hex digits) of op under policy
// p (StepKey when p.Key is nil): SHA-256 over the length-prefixed parts namespace, tenant, then
// the strategy's parts (StepKey: "step", workflow ID, step ID; or without a step ID "call",
// workflow ID, tool, material arguments; ArgsKey: "args", workflow ID, tool, then each field's
// name and canonical value; ExplicitKey: "explicit", tool, the function's string). It returns an
// error wrapping ErrNoKey, before anything is claimed, when a part is empty or only white space,
// the arguments cannot be encoded exactly, an ArgsKey field is absent, null or blank, or an
// ExplicitKey function fails.
func Key(p Policy, op Operation) (string, error) {
	return deriveKey(p.keyStrategy(), newCallArgs(op, p.Exclude))
}

// keyStrategy returns p.Key, or StepKey when it is nil.
func (p Policy) keyStrategy() KeyStrategy {
	if p.Key == nil {
		return StepKey()
	}
	return p.Key
}

// Fingerprint returns the fingerprint of op under policy p: the lower-case hex SHA-256 of the
// canonical JSON (package canonical) of {"args": arguments minus p.Exclude, "tool": op.Tool,
// "version": p.Version}, where arguments is the single argument, or an array of them when there
// are several. It reads op.Args when called: compute it before the tool body runs, since a body
// may mutate a map or pointer argument. Arguments that cannot be encoded exactly (NaN, invalid
// UTF-8, a channel…) give an error wrapping a *canonical.Error that names the field path.
//
// Without a secret a fingerprint of guessable arguments (an e-mail address and an amount) reveals
// them to whoever can read it and try candidates: use KeyedFingerprint with a deployment secret.
func Fingerprint(p Policy, op Operation) (string, error) {
	return fingerprint(op.Tool, p.Version, newCallArgs(op, p.Exclude), nil)
}

// KeyedFingerprint is Fingerprint keyed with a deployment secret: KeyedFingerprintPrefix ("k1_")
// and the lower-case hex HMAC-SHA-256 under secret of the same canonical JSON, so that a stored
// fingerprint cannot be tested against guessed arguments without the secret. An empty secret
// gives Fingerprint. Every worker of a deployment must use the same secret: a record made under
// another secret (or none) does not match, so its repeats are refused as fingerprint mismatches.
func KeyedFingerprint(p Policy, op Operation, secret []byte) (string, error) {
	return fingerprint(op.Tool, p.Version, newCallArgs(op, p.Exclude), secret)
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
	_, err := walkTypeTo(t, segs)
	return err
}

// walkTypeTo walks the dotted path segs from t and returns the type it names, or nil when the
// path goes into a value whose shape the type does not tell (an interface, a type with its own
// MarshalJSON).
func walkTypeTo(t reflect.Type, segs []string) (reflect.Type, error) {
	for _, seg := range segs {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == timeType {
			return nil, fmt.Errorf("%q is inside a time.Time, which has no fields", seg)
		}
		if t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) {
			return nil, nil // its own MarshalJSON decides the shape
		}
		switch t.Kind() {
		case reflect.Interface:
			return nil, nil // anything may be inside
		case reflect.Map:
			switch t.Key().Kind() {
			case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			default:
				if !t.Key().Implements(textMarshalerType) {
					return nil, fmt.Errorf("map key %s cannot be encoded", t.Key())
				}
			}
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			if _, err := strconv.Atoi(seg); err != nil {
				return nil, fmt.Errorf("%q indexes a list: want a number", seg)
			}
			t = t.Elem()
		case reflect.Struct:
			f, ok := canonical.StructField(t, seg)
			if !ok {
				return nil, fmt.Errorf("%s has no JSON field %q; its JSON fields are %s (JSON names are exact, as json tags spell them)",
					t, seg, quoteAll(canonical.StructFields(t)))
			}
			t = f
		default:
			return nil, fmt.Errorf("%q is inside a %s, which has no fields", seg, t)
		}
	}
	return t, nil
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// ToolDefinition is what a model is told about one tool: its name, a description and its input
// type, from the Registry. The adapters module turns it into the openai-go, anthropic-sdk-go and
// MCP shapes, with a JSON Schema of Input.
type ToolDefinition struct {
	// Name is the tool's name: the activity type, or the name given to SetTool.
	Name string
	// Description is Policy.Description followed by EffectSentence(Policy.Effect), or by
	// KeyOnlySentence for a Policy.KeyOnly tool.
	Description string
	// Input is the tool's input type; nil when the tool was registered by name only (any JSON
	// object).
	Input  reflect.Type
	Policy Policy
}

// EffectSentence returns the sentence a tool definition's description ends with, telling a
// model what a repeat of a tool of class e does and what in_flight and unknown mean.
func EffectSentence(e Effect) string {
	switch e {
	case ReadOnly:
		return "It changes nothing: calling it again is always safe."
	case Idempotent, Transactional:
		return "Repeating an identical call lands the same state and returns the stored result; if the status is in_flight, " +
			"wait and call again with the same arguments."
	}
	return "It has side effects: an identical repeat returns the stored result instead of acting again; if the status is " +
		"in_flight, wait and call again with the same arguments; if it is unknown, do not repeat it."
}

// KeyOnlySentence is the sentence a Policy.KeyOnly tool's description ends with: nothing is
// stored for it, so a repeat runs again, and the service it calls is what makes it land once.
const KeyOnlySentence = "Repeating an identical call is safe: it runs again with the same idempotency key, " +
	"and the service it calls does the work once."

// Definitions returns the tool definitions of the registered tools named in tools, in that
// order, or of every registered tool sorted by name when tools is empty. It returns a
// *PolicyError for a name with no policy.
func (r *Registry) Definitions(tools ...string) ([]ToolDefinition, error) {
	if len(tools) == 0 {
		tools = r.Tools()
		slices.Sort(tools)
	}
	out := make([]ToolDefinition, 0, len(tools))
	for _, name := range tools {
		p, ok := r.Policy(name)
		if !ok {
			return nil, &PolicyError{Tool: name, Field: "activity", Reason: "no policy registered under this name"}
		}
		in, _ := r.InputType(name)
		desc := EffectSentence(p.Effect)
		if p.KeyOnly {
			desc = KeyOnlySentence
		}
		if d := strings.TrimSpace(p.Description); d != "" {
			desc = d + " " + desc
		}
		out = append(out, ToolDefinition{Name: name, Description: desc, Input: in, Policy: p})
	}
	return out, nil
}

// CheckGrantRule parses rule and checks it against the input type of tool: every path names a
// field of it (as Policy.Exclude paths are checked), and every literal can be a value there (a
// number for an integer or float field, a string for a string or text-marshalled field, true or
// false for a bool; null for any). A field whose type has its own MarshalJSON, or is
// an interface, takes any literal. A tool registered by name only (no input type) checks the
// syntax alone; an unknown tool is an error.
func (r *Registry) CheckGrantRule(tool, rule string) error {
	parsed, err := oncekeystore.ParseGrantRule(rule)
	if err != nil || parsed == nil {
		return err
	}
	if _, ok := r.Policy(tool); !ok {
		return fmt.Errorf("no policy for the tool %q in the registry", tool)
	}
	in, ok := r.InputType(tool)
	if !ok {
		return nil
	}
	return parsed.CheckTypes(func(path []string) (reflect.Type, error) { return walkTypeTo(in, path) })
}
