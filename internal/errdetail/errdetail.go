// Package errdetail reads the details of a Temporal application error without the SDK's panics.
package errdetail

import (
	"encoding/json"

	"go.temporal.io/sdk/temporal"
)

// Into reads appErr's first detail into dst (a pointer) through its JSON form and reports
// whether it did. It reads both an error that crossed Temporal (its details encoded) and one made
// in the same workflow code (its details held as Go values). The SDK gives a Go value back only
// into a destination of its exact type and panics otherwise (reflect.Set), and panics on a nil
// detail (temporal.NewApplicationError(msg, typ, nil) passes one); here the detail is read into
// an interface value, a panic reads as no detail, and a detail of another shape reads as none.
func Into(appErr *temporal.ApplicationError, dst any) bool {
	v, ok := first(appErr)
	if !ok {
		return false
	}
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, dst) == nil
}

func first(appErr *temporal.ApplicationError) (v any, ok bool) {
	defer func() {
		if recover() != nil {
			v, ok = nil, false
		}
	}()
	if !appErr.HasDetails() || appErr.Details(&v) != nil || v == nil {
		return nil, false
	}
	return v, true
}
