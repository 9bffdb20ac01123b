package oncekey

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/oncekey/oncekey/canonical"
	"github.com/oncekey/oncekey/internal/jsondoc"
)

// RouteError: a Route could not name the tool of one call, or find its arguments: a path of the
// Route (Route.ToolPaths, Route.Args) names nothing in the call's arguments document, the tool's
// name there is not a string or is blank, or Route.Tool did not recognise the call. Such a call
// has no identity of its own (keying it by what is absent would make every such call one
// operation), so it is never keyed: Registry.Resolve returns the error, and the interceptor
// fails the call non-retryably with application error type ErrTypeConfig before anything is
// claimed or run (on the workflow side before the activity is scheduled, on the worker before
// the claim). The fix is in the Route: its paths are the JSON member names of the activity's
// input, as its json tags spell them.
type RouteError struct {
	// ActivityType is the activity type whose Route it is.
	ActivityType string
	// Field is the Route's field: "Route.ToolPaths", "Route.Tool" or "Route.Args".
	Field string
	// Path is the dotted path that did not resolve; "" for Route.Tool.
	Path string
	// Reason says what is at the path: `no member "tool"`, `"tool_name" is a number, not a
	// string`, `"tool_name" is blank`, "it named no tool" (Route.Tool).
	Reason string
	// Members are the JSON member names of the object where the path stopped (the arguments
	// document itself for a one-segment path), sorted; nil when the path stopped at a value that
	// is not an object.
	Members []string
}

func (e *RouteError) Error() string {
	what := e.Field
	if e.Path != "" {
		what = fmt.Sprintf("%s path %q", e.Field, e.Path)
	}
	members := "the value there is not a JSON object"
	if e.Members != nil {
		members = "the members there are " + quoteAll(e.Members)
		if len(e.Members) == 0 {
			members = "the object there has no members"
		}
	}
	return fmt.Sprintf("oncekey: %s did not run: its %s does not resolve in the call's arguments (%s; %s); nothing was claimed. "+
		"A Route's paths are the JSON member names of the activity's input, as its json tags spell them: fix the Route",
		e.ActivityType, what, e.Reason, members)
}

// toolOf names the tool of one call of activityType from its decoded arguments document doc
// (its canonical JSON is raw): the strings at rt.ToolPaths joined with ".", or what rt.Tool
// says. It returns a *RouteError when they name none.
func (rt Route) toolOf(activityType string, raw json.RawMessage, doc any) (string, error) {
	if len(rt.ToolPaths) == 0 {
		tool, ok := rt.Tool(raw)
		if !ok || blank(tool) {
			return "", &RouteError{ActivityType: activityType, Field: "Route.Tool", Reason: "it named no tool",
				Members: objectMembers(doc)}
		}
		return tool, nil
	}
	parts := make([]string, 0, len(rt.ToolPaths))
	for _, p := range rt.ToolPaths {
		v, err := routePath(activityType, "Route.ToolPaths", p, doc)
		if err != nil {
			return "", err
		}
		s, ok := v.(string)
		if !ok || blank(s) {
			reason := fmt.Sprintf("%q is %s, not a string", lastSegment(p), kindOf(v))
			if ok {
				reason = fmt.Sprintf("%q is blank", lastSegment(p))
			}
			return "", &RouteError{ActivityType: activityType, Field: "Route.ToolPaths", Path: p, Reason: reason, Members: parentMembers(doc, p)}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "."), nil
}

// argsOf returns the value at rt.Args in the decoded document doc: null when the member is absent
// and the Route knows it for an omitempty (or omitzero) field, else a *RouteError for an absent
// member, whose Reason names omitempty as a cause when the Route does not know the input type.
func (rt Route) argsOf(activityType string, doc any) (any, error) {
	v, err := routePath(activityType, "Route.Args", rt.Args, doc)
	if err == nil || !absentMember(doc, rt.Args) {
		return v, err
	}
	if rt.argsOmittable {
		return nil, nil
	}
	if re, ok := err.(*RouteError); ok && !rt.typed {
		re.Reason += "; an input field tagged omitempty leaves it out of a call with empty arguments: " +
			"given the activity's function value, a Route reads that absence as null"
	}
	return nil, err
}

// absentMember reports whether the object holding the last segment of path in doc is there and
// lacks that member.
func absentMember(doc any, path string) bool {
	if i := strings.LastIndex(path, "."); i >= 0 {
		var ok bool
		if doc, ok = jsondoc.Lookup(doc, path[:i]); !ok {
			return false
		}
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	_, has := m[lastSegment(path)]
	return !has
}

// omittable reports whether the dotted path ends at a struct field of the arguments of fn tagged
// omitempty or omitzero, which the encoding leaves out when it is empty (or zero).
func omittable(fn reflect.Type, path string) bool {
	parent, last := "", path
	if i := strings.LastIndex(path, "."); i >= 0 {
		parent, last = path[:i], path[i+1:]
	}
	t := pathType(fn, parent)
	return t != nil && canonical.StructFieldOmittable(t, last)
}

// routePath returns the value at the dotted path in the decoded document doc, or a *RouteError
// for field naming where the path stops.
func routePath(activityType, field, path string, doc any) (any, error) {
	cur := doc
	for i, seg := range strings.Split(path, ".") {
		v, ok := jsondoc.Lookup(cur, seg)
		if !ok {
			reason := fmt.Sprintf("no member %q", seg)
			if _, isArray := cur.([]any); isArray {
				reason = fmt.Sprintf("no element %q", seg)
			}
			if i > 0 {
				reason += fmt.Sprintf(" in %q", strings.Join(strings.Split(path, ".")[:i], "."))
			}
			return nil, &RouteError{ActivityType: activityType, Field: field, Path: path, Reason: reason, Members: objectMembers(cur)}
		}
		cur = v
	}
	return cur, nil
}

// objectMembers returns the sorted member names of v when it is a JSON object, else nil.
func objectMembers(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// parentMembers returns the members of the object holding the last segment of path in doc.
func parentMembers(doc any, path string) []string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		doc, _ = jsondoc.Lookup(doc, path[:i])
	}
	return objectMembers(doc)
}

func lastSegment(path string) string { return path[strings.LastIndex(path, ".")+1:] }

// checkRoute checks rt's paths against the activity's function type fn (nil: not known, so
// nothing is checked but the paths' syntax). A tool path must lead to a string (or to a value
// whose shape the type does not tell: an interface, a map's element, a type with its own
// MarshalJSON).
func checkRoute(name string, fn reflect.Type, rt Route) error {
	check := func(field, path string, wantString bool) error {
		if path == "" || slices.Contains(strings.Split(path, "."), "") {
			return &PolicyError{Tool: name, Field: field, Reason: fmt.Sprintf("path %q has an empty segment", path)}
		}
		if fn == nil {
			return nil
		}
		if err := checkPath(fn, path); err != nil {
			return &PolicyError{Tool: name, Field: field, Reason: fmt.Sprintf("path %q: %v", path, err)}
		}
		if !wantString {
			return nil
		}
		t := pathType(fn, path)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != nil && t.Kind() != reflect.String && t.Kind() != reflect.Interface {
			return &PolicyError{Tool: name, Field: field, Reason: fmt.Sprintf("path %q is a %s, not a string: the tool's name must be a string", path, t)}
		}
		return nil
	}
	for _, p := range rt.ToolPaths {
		if err := check("Route.ToolPaths", p, true); err != nil {
			return err
		}
	}
	if rt.Args != "" {
		return check("Route.Args", rt.Args, false)
	}
	return nil
}

// pathType returns the type the dotted path names in the arguments of fn ("": the one argument
// of an activity that takes one), or nil when the types do not tell it (see walkTypeTo). The path
// has been checked with checkPath.
func pathType(fn reflect.Type, path string) reflect.Type {
	var params []reflect.Type
	for i := 0; i < fn.NumIn(); i++ {
		if i == 0 && fn.In(0).Implements(contextType) {
			continue
		}
		params = append(params, fn.In(i))
	}
	var segs []string
	if path != "" {
		segs = strings.Split(path, ".")
	}
	if len(params) == 1 {
		t, _ := walkTypeTo(params[0], segs)
		return t
	}
	if len(segs) == 0 {
		return nil
	}
	i, err := strconv.Atoi(segs[0])
	if err != nil || i < 0 || i >= len(params) {
		return nil
	}
	t, _ := walkTypeTo(params[i], segs[1:])
	return t
}

func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}
