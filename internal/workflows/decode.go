package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// strictJSONChangeID is the workflow.GetVersion change ID under which a signal's decision or
// resolution with a JSON member its type does not have is refused (decodeStrict) instead of taken
// with the member dropped. Histories recorded before it have no marker and decode signals as
// they did (signalJSON, not strict). The update validators are always strict: they never run on replay.
const strictJSONChangeID = "oncekey-strict-json"

// strictSignals reports whether this run decodes signals strictly (strictJSONChangeID). The SDK
// records the version at the first call of a run and answers later calls from it.
func strictSignals(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, strictJSONChangeID, workflow.DefaultVersion, 1) == 1
}

// signalJSON decodes a signal's payload into a T, what the signal carries (a "resolution", of Go
// type goType), strictly (decodeStrict) or, as before strictJSONChangeID, as the default data
// converter does (dropping members T does not have), or says why it does not.
func signalJSON[T any](raw converter.RawValue, strict bool, what, goType string) (T, string) {
	var zero T
	p := raw.Payload()
	if p == nil {
		return zero, fmt.Sprintf("the signal carries no %s: send one JSON object, %s", what, goType)
	}
	undecodable := func(err error) (T, string) {
		return zero, fmt.Sprintf("the signal does not decode into a %s (one JSON object, %s): %v", what, goType, err)
	}
	if !strict {
		var v T
		if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
			return undecodable(err)
		}
		return v, ""
	}
	var data json.RawMessage
	if err := converter.GetDefaultDataConverter().FromPayload(p, &data); err != nil {
		return undecodable(err)
	}
	return decodeStrict[T](data, "the signal", what, goType)
}

// decodeStrict decodes data, one JSON object that subject ("the signal", "the update") carries,
// into a T (a struct whose fields have json tags), or says why it does not: no object, a member T
// does not have (named, with the members T has; a member is T's when it equals one of T's names
// but for case, as encoding/json matches them), a value of the wrong type. With unknown members
// it returns the T the known ones decode into beside the reason, so a refusal can name its
// RequestID.
func decodeStrict[T any](data []byte, subject, what, goType string) (T, string) {
	var zero T
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return zero, fmt.Sprintf("%s carries no %s: send one JSON object, %s", subject, what, goType)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return zero, fmt.Sprintf("%s does not decode into a %s (one JSON object, %s): %v", subject, what, goType, err)
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return zero, fmt.Sprintf("%s does not decode into a %s (one JSON object, %s): %v", subject, what, goType, err)
	}
	names := jsonNames(reflect.TypeFor[T]())
	var unknown []string
	for m := range members {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, m) }) {
			unknown = append(unknown, m)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, m := range unknown {
			quoted[i] = fmt.Sprintf("%q", m)
			if n := nearName(names, m); n != "" {
				quoted[i] += fmt.Sprintf(" (did you mean %q?)", n)
			}
		}
		noun := "member"
		if len(unknown) > 1 {
			noun = "members"
		}
		return v, fmt.Sprintf("the %s has the unknown %s %s; nothing was taken: send it again with %s's members, %s",
			what, noun, strings.Join(quoted, ", "), goType, strings.Join(names, ", "))
	}
	return v, ""
}

// jsonNames returns the JSON member names of struct type t's fields, in field order.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// nearName returns the name of names that m spells another way (another case, camelCase for
// snake_case, dashes), or "".
func nearName(names []string, m string) string {
	fold := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
	}
	for _, n := range names {
		if fold(n) == fold(m) {
			return n
		}
	}
	return ""
}
