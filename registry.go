package oncekey

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Registry maps tool names (registered activity names) to policies. It is safe for concurrent use.
// A tool without a policy is passed through untouched.
type Registry struct {
	mu       sync.RWMutex
	policies map[string]Policy
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{policies: map[string]Policy{}} }

// Set registers p for an activity, given as its function value (the name is derived the way the
// Temporal SDK derives it: the function or method name) or as its registered name.
//
// Set returns a *PolicyError when the policy is invalid, when an ArgsKey or Exclude field is not
// a JSON field of the activity's input type, or when such fields are given with a name instead of
// a function value (the input type is then unknown).
func (r *Registry) Set(activity any, p Policy) error {
	name, fnType, err := activityName(activity)
	if err != nil {
		return err
	}
	if err := p.validate(name); err != nil {
		return err
	}
	var paths []string
	if p.Key != nil {
		paths = append(paths, p.Key.fields()...)
	}
	paths = append(paths, p.Exclude...)
	if len(paths) > 0 {
		if fnType == nil {
			return &PolicyError{Tool: name, Field: "Key/Exclude", Reason: "argument fields need the activity's function value, not its name, so they can be checked"}
		}
		for _, path := range paths {
			if err := checkPath(fnType, path); err != nil {
				return &PolicyError{Tool: name, Field: "Key/Exclude", Reason: fmt.Sprintf("field %q: %v", path, err)}
			}
		}
	}
	r.mu.Lock()
	r.policies[name] = p.withDefaults()
	r.mu.Unlock()
	return nil
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

// Key returns the printable operation key ("ok1_" + 64 hex digits) of op under policy p.
// It returns an error wrapping ErrNoKey when a part of the key is empty or missing.
func Key(p Policy, op Operation) (string, error) {
	ks := p.Key
	if ks == nil {
		ks = StepKey()
	}
	return deriveKey(ks, op)
}

// Fingerprint returns the fingerprint of op under policy p: the hex SHA-256 of the canonical JSON
// of {tool, version, arguments minus p.Exclude}.
func Fingerprint(p Policy, op Operation) (string, error) {
	return fingerprint(op.Tool, p.Version, p.Exclude, op.Args)
}

var contextType = reflect.TypeOf((*context.Context)(nil)).Elem()

func activityName(activity any) (string, reflect.Type, error) {
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
	full := runtime.FuncForPC(v.Pointer()).Name()
	elems := strings.Split(full, ".")
	name := strings.TrimSuffix(elems[len(elems)-1], "-fm")
	return name, v.Type(), nil
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
		switch t.Kind() {
		case reflect.Interface:
			return nil // anything may be inside
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				return fmt.Errorf("map key %s is not a string", t.Key())
			}
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			if _, err := strconv.Atoi(seg); err != nil {
				return fmt.Errorf("%q indexes a list: want a number", seg)
			}
			t = t.Elem()
		case reflect.Struct:
			f, ok := jsonField(t, seg)
			if !ok {
				return fmt.Errorf("%s has no JSON field %q", t, seg)
			}
			t = f
		default:
			return fmt.Errorf("%q is inside a %s, which has no fields", seg, t)
		}
	}
	return nil
}

// jsonField finds the field whose encoding/json name is exactly name (embedded structs included).
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		tagName, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && tagName == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, ok := jsonField(ft, name); ok {
					return inner, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		n := f.Name
		if tagName != "" {
			n = tagName
		}
		if n == name {
			return f.Type, true
		}
	}
	return nil, false
}
