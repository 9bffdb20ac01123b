package oncekey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// ResultTypeError is a result given for a tool (a resolution's result for an unknown outcome)
// that does not decode (encoding/json) into the tool's result type. Registry.CheckResult returns
// it; the reconciliation workflow refuses such a resolution with its message, so every way of
// settling (oncekey resolve, the inbox, reconcile.Resolve, the update, the signal) says the same.
type ResultTypeError struct {
	// Tool is the tool's name; Type its result type.
	Tool string
	Type reflect.Type
	// Example is the JSON of a value of Type, one result the check accepts.
	Example json.RawMessage
	// Err is encoding/json's error.
	Err error
}

func (e *ResultTypeError) Error() string {
	return fmt.Sprintf("the result does not decode into %s's result type %s (%v); give JSON of that type, e.g. %s",
		e.Tool, e.Type, e.Err, e.Example)
}

func (e *ResultTypeError) Unwrap() error { return e.Err }

// ResultTypeOf returns the result type of the tool a call of activityType names: for an
// activity type whose Route was registered with the function value of an activity returning
// (T, error), T (the activity's result is what every tool it carries returns); otherwise the
// tool's own (ResultType). activityType may be ""
// (not known): the tool's own type is then returned. It returns false when neither is known.
func (r *Registry) ResultTypeOf(activityType, tool string) (reflect.Type, bool) {
	if activityType != "" {
		rt, ok := lookup(r, func(r *Registry) map[string]Route { return r.routes }, activityType)
		if ok && rt.result != nil {
			return rt.result, true
		}
	}
	return r.ResultType(tool)
}

// CheckResult returns a *ResultTypeError when result, the JSON result of a call of tool (through
// the activity type activityType, "" when not known), does not decode into the tool's result
// type (ResultTypeOf). It returns nil when result is empty (the zero value) or the result type is
// unknown. It is the one check every way of settling an unknown outcome goes through; a nil
// Registry checks nothing.
func (r *Registry) CheckResult(activityType, tool string, result json.RawMessage) error {
	if len(bytes.TrimSpace(result)) == 0 {
		return nil
	}
	t, ok := r.ResultTypeOf(activityType, tool)
	if !ok {
		return nil
	}
	if err := json.Unmarshal(result, reflect.New(t).Interface()); err != nil {
		return &ResultTypeError{Tool: tool, Type: t, Example: ExampleResult(t), Err: err}
	}
	return nil
}

// ExampleResult returns the JSON of a value of t that decodes into t: strings are "text",
// numbers 0, a pointer points to an example of its element, a slice or array holds one example
// element, a map with string keys one entry "key"; a struct's exported fields are filled the same
// way, five levels deep. A type with its own MarshalJSON or MarshalText keeps its zero value. It
// falls back to the zero value's JSON, then to null.
func ExampleResult(t reflect.Type) json.RawMessage {
	for _, v := range []reflect.Value{example(t, 0), reflect.New(t).Elem()} {
		b, err := json.Marshal(v.Interface())
		if err == nil && json.Unmarshal(b, reflect.New(t).Interface()) == nil {
			return b
		}
	}
	return json.RawMessage("null")
}

// maxExampleDepth bounds example's recursion (a recursive type is filled this deep).
const maxExampleDepth = 5

// example returns a value of t filled as ExampleResult says.
func example(t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	if depth > maxExampleDepth || t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return v
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString("text")
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(example(t.Elem(), depth+1))
		v.Set(p)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return v // []byte is base64: its zero value is the clearer example
		}
		v.Set(reflect.Append(v, example(t.Elem(), depth+1)))
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			v.Index(i).Set(example(t.Elem(), depth+1))
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			m := reflect.MakeMap(t)
			m.SetMapIndex(reflect.ValueOf("key").Convert(t.Key()), example(t.Elem(), depth+1))
			v.Set(m)
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && v.Field(i).CanSet() {
				v.Field(i).Set(example(f.Type, depth+1))
			}
		}
	}
	return v
}
