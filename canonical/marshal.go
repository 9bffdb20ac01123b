package canonical

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Marshal returns the canonical JSON form of v (see Transform).
//
// v is encoded the way encoding/json encodes it — json struct tags (names, omitempty, omitzero,
// string), embedded structs, json.Marshaler and encoding.TextMarshaler methods, []byte as base64,
// map keys that are strings, integers or TextMarshalers — with these differences, which keep one
// value from having two encodings or two values from sharing one:
//
//   - a time.Time (also as a map key) is written in UTC, RFC 3339 with nanoseconds as needed,
//     so the same instant in two time zones encodes the same;
//   - integers of every size (int64, uint64, *big.Int, json.Number) are written exactly;
//   - a value JSON cannot carry exactly is an *Error naming its path, never a lossy substitute:
//     NaN and ±Inf floats (ErrNonFinite), strings and map keys that are not valid UTF-8
//     (ErrInvalidUTF8; encoding/json would turn them into U+FFFD), channels, functions, complex
//     numbers and unsupported map keys (ErrUnsupported), cycles (ErrTooDeep), a failing or invalid
//     MarshalJSON/MarshalText (ErrMarshaler), and whatever Transform refuses in the result, such
//     as two map keys equal after NFC (ErrNFCCollision).
//
// Paths in errors use JSON names: `canonical: .Order.Items[2].Price: NaN cannot be encoded`.
func Marshal(v any) ([]byte, error) {
	return marshal(v, nil)
}

// MarshalFloats is Marshal, and also returns the paths (in Error.Path's form, "." for the
// document itself) of the numbers it wrote from float32 and float64 values, in the order
// written. A number inside the output of a MarshalJSON method is not among them. It is how a
// caller tells a number decoded into a float (which may be the rounding of a larger integer)
// from an exact one.
func MarshalFloats(v any) (out []byte, floats []string, err error) {
	floats = []string{}
	out, err = marshal(v, &floats)
	return out, floats, err
}

func marshal(v any, floats *[]string) ([]byte, error) {
	e := encoderPool.Get().(*encoder)
	defer e.release()
	e.floats = floats
	if handled, err := e.generic(v); err != nil {
		return nil, err
	} else if !handled {
		if err := e.value(reflect.ValueOf(v), false); err != nil {
			return nil, err
		}
	}
	out, err := Transform(e.buf)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.Offset = -1 // an offset into our own intermediate text means nothing to the caller
		}
		return nil, err
	}
	return out, nil
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
	numberType        = reflect.TypeFor[json.Number]()
)

type encoder struct {
	buf   []byte
	path  []pathSeg
	depth int
	// floats, when not nil, collects the paths of the numbers written from float values.
	floats *[]string
}

var encoderPool = sync.Pool{New: func() any { return new(encoder) }}

func (e *encoder) release() {
	if cap(e.buf) > 1<<20 {
		e.buf = nil
	}
	e.buf, e.path, e.depth, e.floats = e.buf[:0], e.path[:0], 0, nil
	encoderPool.Put(e)
}

func (e *encoder) fail(kind error, detail string, cause error) error {
	return &Error{Kind: kind, Path: formatPath(e.path), Offset: -1, Detail: detail, Cause: cause}
}

// maxEncodeDepth bounds recursion through values, pointers and interfaces included, so that a
// cycle is an error rather than a stack overflow.
const maxEncodeDepth = 2 * MaxDepth

// value appends the JSON encoding of v. quoted is the json ",string" option.
func (e *encoder) value(v reflect.Value, quoted bool) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxEncodeDepth {
		return e.fail(ErrTooDeep, "value nested too deep, or cyclic", nil)
	}
	t := v.Type()
	if t == timeType {
		return e.time(v.Interface().(time.Time))
	}
	if t.Kind() == reflect.Pointer && t.Elem() == timeType {
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.time(v.Elem().Interface().(time.Time))
	}
	// Methods, in encoding/json's order: MarshalJSON before MarshalText, and for each a
	// pointer-receiver method is used when v is addressable.
	for _, m := range methods {
		if t.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(m.typ) {
			return m.encode(e, v.Addr())
		}
		if t.Kind() != reflect.Interface && t.Implements(m.typ) {
			if t.Kind() == reflect.Pointer && v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			return m.encode(e, v)
		}
	}

	switch t.Kind() {
	case reflect.Bool:
		e.quote(quoted)
		e.buf = strconv.AppendBool(e.buf, v.Bool())
		e.quote(quoted)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.quote(quoted)
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
		e.quote(quoted)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.quote(quoted)
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
		e.quote(quoted)
	case reflect.Float32, reflect.Float64:
		return e.float(v.Float(), t.Bits(), quoted)
	case reflect.String:
		return e.string(v, quoted)
	case reflect.Struct:
		return e.structValue(v)
	case reflect.Map:
		return e.mapValue(v)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			p := reflect.PointerTo(t.Elem())
			if !p.Implements(marshalerType) && !p.Implements(textMarshalerType) {
				e.buf = append(e.buf, '"')
				e.buf = base64.StdEncoding.AppendEncode(e.buf, v.Bytes())
				e.buf = append(e.buf, '"')
				return nil
			}
		}
		return e.array(v)
	case reflect.Array:
		return e.array(v)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if t.Kind() == reflect.Interface {
			quoted = false
		}
		return e.value(v.Elem(), quoted)
	default: // Complex64, Complex128, Chan, Func, UnsafePointer
		return e.fail(ErrUnsupported, "a "+t.String()+" cannot be encoded", nil)
	}
	return nil
}

// generic appends the encoding of x when it is of a type encoding/json decodes JSON into for an
// interface (map[string]any, []any, string, float64, bool): the shape of a model's tool call
// decoded into a map. It writes what value writes for it, depth and error paths included, without
// reflection. handled is false, and nothing is written, for any other type.
func (e *encoder) generic(x any) (handled bool, err error) {
	switch x := x.(type) {
	case map[string]any:
		return true, e.genericMap(x)
	case []any:
		return true, e.genericArray(x)
	case string:
		return true, e.enter(func() error { return e.plainString(x) })
	case float64:
		return true, e.enter(func() error { return e.float(x, 64, false) })
	case bool:
		return true, e.enter(func() error { e.buf = strconv.AppendBool(e.buf, x); return nil })
	}
	return false, nil
}

// enter runs write one level deeper, as value counts levels.
func (e *encoder) enter(write func() error) error {
	e.depth++
	if e.depth > maxEncodeDepth {
		return e.fail(ErrTooDeep, "value nested too deep, or cyclic", nil)
	}
	err := write()
	e.depth--
	return err
}

// element appends the encoding of x, a member of a map[string]any or an element of a []any: as
// value does for the interface holding it, which counts one level.
func (e *encoder) element(x any) error {
	e.depth++
	if e.depth > maxEncodeDepth {
		return e.fail(ErrTooDeep, "value nested too deep, or cyclic", nil)
	}
	var err error
	if x == nil {
		e.buf = append(e.buf, "null"...)
	} else if handled, gerr := e.generic(x); handled {
		err = gerr
	} else {
		err = e.value(reflect.ValueOf(x), false)
	}
	e.depth--
	return err
}

// genericMap is mapValue for a map[string]any.
func (e *encoder) genericMap(m map[string]any) error {
	return e.enter(func() error {
		if m == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '{')
		first := true
		for name, x := range m {
			if !utf8.ValidString(name) {
				return e.fail(ErrInvalidUTF8, "map key "+strconv.Quote(name)+" is not valid UTF-8", nil)
			}
			if !first {
				e.buf = append(e.buf, ',')
			}
			first = false
			e.member(name)
			e.path = append(e.path, pathSeg{name: name})
			if err := e.element(x); err != nil {
				return err
			}
			e.path = e.path[:len(e.path)-1]
		}
		e.buf = append(e.buf, '}')
		return nil
	})
}

// genericArray is array for a []any.
func (e *encoder) genericArray(a []any) error {
	return e.enter(func() error {
		if a == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		e.path = append(e.path, pathSeg{isIdx: true})
		for i, x := range a {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.path[len(e.path)-1].index = i
			if err := e.element(x); err != nil {
				return err
			}
		}
		e.path = e.path[:len(e.path)-1]
		e.buf = append(e.buf, ']')
		return nil
	})
}

func (e *encoder) quote(quoted bool) {
	if quoted {
		e.buf = append(e.buf, '"')
	}
}

func (e *encoder) time(t time.Time) error {
	b, err := t.UTC().MarshalJSON()
	if err != nil {
		return e.fail(ErrMarshaler, "time "+t.String()+" cannot be encoded", err)
	}
	e.buf = append(e.buf, b...)
	return nil
}

// methods are the marshaling methods the encoder uses, in encoding/json's order, each with the
// encoder's method that encodes a value having it.
var methods = []struct {
	typ    reflect.Type
	encode func(e *encoder, v reflect.Value) error
}{
	{marshalerType, (*encoder).marshalJSON},
	{textMarshalerType, (*encoder).marshalText},
}

// callMarshaler calls method (named name) on v's M and returns what it wrote; done is set, and
// null written, when v holds no M (a nil interface), and err is an ErrMarshaler error when the
// method failed.
func callMarshaler[M any](e *encoder, v reflect.Value, name string, method func(M) ([]byte, error)) (b []byte, done bool, err error) {
	m, ok := v.Interface().(M)
	if !ok {
		e.buf = append(e.buf, "null"...)
		return nil, true, nil
	}
	b, err = method(m)
	if err != nil {
		return nil, true, e.fail(ErrMarshaler, name+" of "+v.Type().String()+" failed", err)
	}
	return b, false, nil
}

func (e *encoder) marshalJSON(v reflect.Value) error {
	b, done, err := callMarshaler(e, v, "MarshalJSON", json.Marshaler.MarshalJSON)
	if done {
		return err
	}
	out, err := AppendTransform(e.buf, b)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			path := formatPath(e.path)
			if ce.Path != "." {
				if path == "." {
					path = ce.Path
				} else {
					path += ce.Path
				}
			}
			return &Error{Kind: ce.Kind, Path: path, Offset: -1,
				Detail: "MarshalJSON of " + v.Type().String() + " returned bad JSON: " + ce.Detail}
		}
		return e.fail(ErrMarshaler, "MarshalJSON of "+v.Type().String()+" returned bad JSON", err)
	}
	e.buf = out
	return nil
}

func (e *encoder) marshalText(v reflect.Value) error {
	b, done, err := callMarshaler(e, v, "MarshalText", encoding.TextMarshaler.MarshalText)
	if done {
		return err
	}
	if !utf8.Valid(b) {
		return e.fail(ErrInvalidUTF8, "MarshalText of "+v.Type().String()+" returned invalid UTF-8", nil)
	}
	e.buf = append(e.buf, '"')
	e.buf = appendEscaped(e.buf, b)
	e.buf = append(e.buf, '"')
	return nil
}

func (e *encoder) float(f float64, bits int, quoted bool) error {
	if math.IsNaN(f) {
		return e.fail(ErrNonFinite, "NaN cannot be encoded", nil)
	}
	if math.IsInf(f, 0) {
		s := "+Inf"
		if f < 0 {
			s = "-Inf"
		}
		return e.fail(ErrNonFinite, s+" cannot be encoded", nil)
	}
	if e.floats != nil {
		*e.floats = append(*e.floats, formatPath(e.path))
	}
	e.quote(quoted)
	if bits == 32 {
		// The shortest digits of the float32, as encoding/json writes them; Transform then reads
		// them as a double.
		e.buf = strconv.AppendFloat(e.buf, f, 'g', -1, 32)
	} else {
		e.buf, _ = AppendFloat(e.buf, f)
	}
	e.quote(quoted)
	return nil
}

func (e *encoder) string(v reflect.Value, quoted bool) error {
	s := v.String()
	if v.Type() == numberType {
		if s == "" {
			s = "0"
		}
		if end, _, ok := scanNumber([]byte(s), 0); !ok || end != len(s) {
			return e.fail(ErrSyntax, "json.Number "+strconv.Quote(s)+" is not a JSON number", nil)
		}
		e.quote(quoted)
		e.buf = append(e.buf, s...)
		e.quote(quoted)
		return nil
	}
	if !quoted {
		return e.plainString(s)
	}
	if !utf8.ValidString(s) {
		return e.fail(ErrInvalidUTF8, "string "+strconv.Quote(s)+" is not valid UTF-8", nil)
	}
	inner := append(append([]byte{'"'}, appendEscaped(nil, []byte(s))...), '"')
	e.buf = append(e.buf, '"')
	e.buf = appendEscaped(e.buf, inner)
	e.buf = append(e.buf, '"')
	return nil
}

// plainString appends s as a JSON string.
func (e *encoder) plainString(s string) error {
	if !utf8.ValidString(s) {
		return e.fail(ErrInvalidUTF8, "string "+strconv.Quote(s)+" is not valid UTF-8", nil)
	}
	e.buf = append(e.buf, '"')
	e.buf = appendEscaped(e.buf, []byte(s))
	e.buf = append(e.buf, '"')
	return nil
}

func (e *encoder) array(v reflect.Value) error {
	e.buf = append(e.buf, '[')
	n := v.Len()
	e.path = append(e.path, pathSeg{isIdx: true})
	for i := 0; i < n; i++ {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.path[len(e.path)-1].index = i
		if err := e.value(v.Index(i), false); err != nil {
			return err
		}
	}
	e.path = e.path[:len(e.path)-1]
	e.buf = append(e.buf, ']')
	return nil
}

func (e *encoder) member(name string) {
	e.buf = append(e.buf, '"')
	e.buf = appendEscaped(e.buf, []byte(name))
	e.buf = append(e.buf, '"', ':')
}

func (e *encoder) structValue(v reflect.Value) error {
	e.buf = append(e.buf, '{')
	first := true
	fields := fieldsOf(v.Type())
	for i := range fields {
		f := &fields[i]
		fv := v
		skip := false
		for _, j := range f.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					skip = true
					break
				}
				fv = fv.Elem()
			}
			fv = fv.Field(j)
		}
		if skip || f.omitEmpty && isEmpty(fv) || f.omitZero && f.isZero(fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.member(f.name)
		e.path = append(e.path, pathSeg{name: f.name})
		if err := e.value(fv, f.quoted); err != nil {
			return err
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) mapValue(v reflect.Value) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	kt := v.Type().Key()
	switch kt.Kind() {
	case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		if !kt.Implements(textMarshalerType) {
			return e.fail(ErrUnsupported, "a map with "+kt.String()+" keys cannot be encoded", nil)
		}
	}
	e.buf = append(e.buf, '{')
	it := v.MapRange()
	first := true
	for it.Next() {
		name, err := e.keyName(it.Key())
		if err != nil {
			return err
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.member(name)
		e.path = append(e.path, pathSeg{name: name})
		if err := e.value(it.Value(), false); err != nil {
			return err
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.buf = append(e.buf, '}')
	return nil
}

// keyName returns the member name for map key k, as encoding/json chooses it.
func (e *encoder) keyName(k reflect.Value) (string, error) {
	var name string
	switch {
	case k.Kind() == reflect.String:
		name = k.String()
	case k.Type() == timeType:
		b, err := k.Interface().(time.Time).UTC().MarshalText()
		if err != nil {
			return "", e.fail(ErrMarshaler, "map key time cannot be encoded", err)
		}
		name = string(b)
	case k.Type().Implements(textMarshalerType):
		if k.Kind() == reflect.Pointer && k.IsNil() {
			break
		}
		b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "", e.fail(ErrMarshaler, "MarshalText of map key "+k.Type().String()+" failed", err)
		}
		name = string(b)
	case k.CanInt():
		name = strconv.FormatInt(k.Int(), 10)
	default:
		name = strconv.FormatUint(k.Uint(), 10)
	}
	if !utf8.ValidString(name) {
		return "", e.fail(ErrInvalidUTF8, "map key "+strconv.Quote(name)+" is not valid UTF-8", nil)
	}
	return name, nil
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
