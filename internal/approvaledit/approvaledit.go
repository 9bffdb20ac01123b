// Package approvaledit checks a person's edit of a call's arguments against the tool's input type
// and derives what the approver is shown (the summary, the changed members), for the engine's
// approval activities and the operator client.
package approvaledit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/canonical"
	"github.com/oncekey/oncekey/oncekeystore"
)

// ApprovalEditError: edited arguments a person gave cannot replace the call's: they are not one
// JSON object, do not decode into the tool's input type, or the tool takes no edits. Nothing was
// written.
type ApprovalEditError struct {
	Tool   string
	Reason string
}

func (e *ApprovalEditError) Error() string {
	return fmt.Sprintf("oncekey: the edited arguments for %s are refused: %s; nothing was decided", e.Tool, e.Reason)
}

// EditArguments checks args, the edited arguments a person gave for tool, against the tool's
// input type (Registry.InputType): one JSON object that decodes into it with no unknown member
// (names matched as encoding/json matches them) and no trailing data. It returns the arguments
// document of the decoded value (CanonicalArgs: what the tool's body receives, a member left out
// holding its zero value) and the value, or an *ApprovalEditError: the
// tool is not in reg, has no Policy.Approval, is carried by a Route, or its input type is not
// known (registered by name only).
func EditArguments(reg *oncekey.Registry, tool string, args json.RawMessage) (json.RawMessage, any, error) {
	refuse := func(format string, a ...any) (json.RawMessage, any, error) {
		return nil, nil, &ApprovalEditError{Tool: tool, Reason: fmt.Sprintf(format, a...)}
	}
	if reg == nil {
		return refuse("the worker has no Registry to check them against")
	}
	p, ok := reg.Policy(tool)
	if !ok || p.Approval == nil {
		return refuse("the tool has no approval policy in the worker's Registry")
	}
	if reg.Routed(tool) {
		return refuse("the tool is carried by a Route; only a tool scheduled with its own input takes edited arguments")
	}
	typ, ok := reg.InputType(tool)
	if !ok {
		return refuse("its input type is unknown (the tool was registered by name only): register it with Set, SetAs or SetTool")
	}
	doc, err := canonical.Transform(args)
	if err != nil {
		return refuse("they are not valid JSON: %v", err)
	}
	if len(doc) == 0 || doc[0] != '{' {
		return refuse("they are not a JSON object")
	}
	v := reflect.New(typ)
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v.Interface()); err != nil {
		return refuse("they do not decode into %s: %v", typ, err)
	}
	if dec.More() {
		return refuse("they hold more than one JSON value")
	}
	// The document is the input as the tool's body receives it, as the worker derives it for any
	// call (a member left out holds its zero value), so the edit's fingerprint is the one the
	// worker computes when the edit runs.
	val := v.Elem().Interface()
	out, err := oncekey.CanonicalArgs([]any{val})
	if err != nil {
		return refuse("they cannot be encoded as the tool's input: %v", err)
	}
	return json.RawMessage(out), val, nil
}

// ChangedMembers returns the top-level members that differ between two arguments documents in
// canonical JSON (changed, added or removed), sorted; nil when either is not a JSON object.
func ChangedMembers(original, edited json.RawMessage) []string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal(original, &a) != nil || json.Unmarshal(edited, &b) != nil || a == nil || b == nil {
		return nil
	}
	var out []string
	for k, v := range b {
		if w, ok := a[k]; !ok || !bytes.Equal(v, w) {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ApprovalSummary returns what the person approving op is shown: a.Summary's text, or
// "<tool>, step <step> of workflow <id>" ("<tool> in workflow <id>" without a step ID, "<tool>,
// standalone activity <id>" for a standalone activity), as the
// store keeps it: valid UTF-8 without NUL bytes, at most MaxApprovalSummaryBytes, cut at a
// character boundary and ending with "…" when longer.
func ApprovalSummary(a *oncekey.ApprovalPolicy, op oncekey.Operation) string {
	summary := fmt.Sprintf("%s in workflow %s", op.Tool, op.WorkflowID)
	if op.Standalone {
		summary = fmt.Sprintf("%s, standalone activity %s", op.Tool, op.ActivityID)
	} else if op.StepID != "" {
		summary = fmt.Sprintf("%s, step %s of workflow %s", op.Tool, op.StepID, op.WorkflowID)
	}
	if a != nil && a.Summary != nil {
		summary = a.Summary(op)
	}
	return ApprovalSummaryText(summary)
}

// ApprovalSummaryText returns s as the store keeps a summary (see ApprovalSummary).
func ApprovalSummaryText(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= oncekeystore.MaxApprovalSummaryBytes {
		return s
	}
	const ellipsis = "…"
	cut := oncekeystore.MaxApprovalSummaryBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
