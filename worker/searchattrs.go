package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/shell"
)

// SearchAttributesError: Options.SearchAttributes is on, but the namespace lacks
// some of oncekey's search attributes, or has one with another type. A workflow that sets an
// unregistered attribute fails its workflow task until it is registered, so the worker does not
// start. Missing and WrongType name the attributes ("OncekeyStatus (Keyword)").
type SearchAttributesError struct {
	Namespace string
	Missing   []string
	WrongType []string
}

func (e *SearchAttributesError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "lacks "+strings.Join(e.Missing, ", "))
	}
	if len(e.WrongType) > 0 {
		parts = append(parts, "has "+strings.Join(e.WrongType, ", ")+" with another type")
	}
	return fmt.Sprintf("oncekey: worker.Options.SearchAttributes is on, but namespace %s %s; register them with `%s` "+
		"(or `temporal operator search-attribute create`), or turn the option off", e.Namespace, strings.Join(parts, " and "),
		shell.Cmd("oncekey", "setup", "search-attributes").Flag("--namespace", e.Namespace))
}

// typeName is the name Temporal's CLI gives t: Keyword, Datetime.
func typeName(t enumspb.IndexedValueType) string {
	n := strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
	return strings.ToUpper(n[:1]) + strings.ToLower(n[1:])
}

// CheckSearchAttributes returns nil when namespace has every search attribute of
// decision.SearchAttributeTypes registered with its type, a *SearchAttributesError when not,
// and the server's error when it cannot be asked (OperatorService.ListSearchAttributes).
func CheckSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	missing, wrong, err := searchAttributeGaps(ctx, c, namespace)
	if err != nil {
		return err
	}
	if len(missing) > 0 || len(wrong) > 0 {
		return &SearchAttributesError{Namespace: namespace, Missing: label(missing), WrongType: label(wrong)}
	}
	return nil
}

// RegisterSearchAttributes registers the search attributes of decision.SearchAttributeTypes
// that namespace lacks (OperatorService.AddSearchAttributes) and returns their names, sorted;
// none when all are there. An attribute registered with another type is a
// *SearchAttributesError: Temporal cannot change a type, so nothing is registered then.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	missing, wrong, err := searchAttributeGaps(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	if len(wrong) > 0 {
		return nil, &SearchAttributesError{Namespace: namespace, WrongType: label(wrong)}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, n := range missing {
		add[n] = decision.SearchAttributeTypes[n]
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add}); err != nil {
		return nil, fmt.Errorf("oncekey: register search attributes %s in namespace %s: %w", strings.Join(missing, ", "), namespace, err)
	}
	return missing, nil
}

// searchAttributeGaps lists oncekey's search attributes namespace lacks and those it has with
// another type, each sorted.
func searchAttributeGaps(ctx context.Context, c client.Client, namespace string) (missing, wrong []string, err error) {
	if c == nil {
		return nil, nil, errors.New("oncekey: check search attributes: no client")
	}
	res, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, nil, fmt.Errorf("oncekey: list the search attributes of namespace %s: %w", namespace, err)
	}
	for name, want := range decision.SearchAttributeTypes {
		got, ok := res.GetCustomAttributes()[name]
		if !ok {
			got, ok = res.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing = append(missing, name)
		case got != want:
			wrong = append(wrong, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(wrong)
	return missing, wrong, nil
}

// label names attributes with their types: "OncekeyStatus (Keyword)".
func label(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s (%s)", n, typeName(decision.SearchAttributeTypes[n]))
	}
	return out
}

// checkAtStart is the plugin's check at worker start: it dials a client of its own from the
// options the plugin saw in ConfigureClient (the worker's client is not handed to plugins),
// checks the namespace, and closes it.
func checkAtStart(ctx context.Context, opts *client.Options) error {
	if opts == nil {
		return errors.New("oncekey: worker.Options.SearchAttributes is on, but the plugin cannot check the namespace's search attributes: " +
			"give the plugin to client.Options.Plugins (not only worker.Options.Plugins), or turn the option off")
	}
	o := *opts
	o.Plugins = nil
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return fmt.Errorf("oncekey: check search attributes: %w", err)
	}
	defer c.Close()
	ns := o.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	return CheckSearchAttributes(ctx, c, ns)
}
