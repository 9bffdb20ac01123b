package canonical

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// field is one JSON member of a struct type, found the way encoding/json finds it.
type field struct {
	name      string
	tagged    bool  // the name comes from a json tag
	index     []int // path of field indexes from the outer struct
	typ       reflect.Type
	omitEmpty bool
	omitZero  bool
	quoted    bool // ",string"
	isZero    func(reflect.Value) bool
}

var fieldCache sync.Map // reflect.Type -> []field

// fieldsOf returns the JSON members of struct type t in encoding/json's order and with its rules:
// exported fields (and exported fields of embedded structs, promoted), json tag names, "-"
// dropped, and of several fields with one name the shallowest wins, a tagged one over untagged
// ones at the same depth, and an unresolved tie drops them all.
func fieldsOf(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	f, _ := fieldCache.LoadOrStore(t, typeFields(t))
	return f.([]field)
}

// StructField returns the type of the member that Marshal writes under the JSON name name for
// struct type t (after following pointers), and whether there is one. Names are matched
// exactly, unlike encoding/json's case-insensitive decoding.
func StructField(t reflect.Type, name string) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for _, f := range fieldsOf(t) {
		if f.name == name {
			return f.typ, true
		}
	}
	return nil, false
}

// StructFieldOmittable reports whether Marshal may leave out the member named name of struct
// type t (after following pointers): whether its field is tagged omitempty or omitzero. It is
// false when t has no such member.
func StructFieldOmittable(t reflect.Type, name string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for _, f := range fieldsOf(t) {
		if f.name == name {
			return f.omitEmpty || f.omitZero
		}
	}
	return false
}

// StructFields returns the JSON names Marshal writes for the members of struct type t (after
// following pointers), in encoding/json's order; nil when t is not a struct.
func StructFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	fs := fieldsOf(t)
	names := make([]string, 0, len(fs))
	for _, f := range fs {
		names = append(names, f.name)
	}
	return names
}

func typeFields(t reflect.Type) []field {
	type queued struct {
		typ   reflect.Type
		index []int
	}
	var fields []field
	next := []queued{{typ: t}}
	visited := map[reflect.Type]bool{}
	// nextCount counts how often each struct type is embedded at the level being queued: a type
	// embedded twice at one depth makes all its promoted names ambiguous.
	var count, nextCount map[reflect.Type]int
	for len(next) > 0 {
		current := next
		next = nil
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			for i := 0; i < q.typ.NumField(); i++ {
				sf := q.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(q.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					nextCount[ft]++
					if nextCount[ft] == 1 {
						next = append(next, queued{typ: ft, index: index})
					}
					continue
				}
				f := field{
					name:      name,
					tagged:    name != "",
					index:     index,
					typ:       ft,
					omitEmpty: hasOption(opts, "omitempty"),
					omitZero:  hasOption(opts, "omitzero"),
				}
				if f.name == "" {
					f.name = sf.Name
				}
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						f.quoted = true
					}
				}
				if f.omitZero {
					f.isZero = zeroFunc(sf.Type)
				}
				fields = append(fields, f)
				if count[q.typ] > 1 {
					fields = append(fields, f) // ambiguous: the tie below drops it
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		group := fields[i:j]
		i = j
		if len(group) == 1 {
			out = append(out, group[0])
			continue
		}
		// The shallowest wins; at equal depth a single tagged field wins; else none.
		if len(group[0].index) == len(group[1].index) && group[0].tagged == group[1].tagged {
			continue
		}
		out = append(out, group[0])
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	return slices.Clip(out)
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// validTagName reports whether encoding/json accepts name as a member name from a tag.
func validTagName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

type isZeroer interface{ IsZero() bool }

var isZeroerType = reflect.TypeFor[isZeroer]()

// zeroFunc returns the omitzero test for a field of type t: its IsZero method if it has one,
// else the zero value.
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() ||
				v.Interface().(isZeroer).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(isZeroer).IsZero() }
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			return v.Addr().Interface().(isZeroer).IsZero()
		}
	}
	return func(v reflect.Value) bool { return v.IsZero() }
}
