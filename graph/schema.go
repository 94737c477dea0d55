package graph

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

var channelType = reflect.TypeFor[channel]()

// field is one channel of a state type.
type field struct {
	name   string // JSON name
	goName string
	index  int
	offset uintptr
	typ    reflect.Type // the channel type (not a pointer)
	ops    channel      // a nil pointer of the channel type, for mergeAt
}

// schema describes a state type S: its channels, found once by reflection.
type schema[S any] struct {
	fields []field
	byName map[string]int
}

func newSchema[S any]() (*schema[S], error) {
	t := reflect.TypeFor[S]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("graph: state type %s must be a struct", t)
	}
	s := &schema[S]{byName: map[string]int{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if !reflect.PointerTo(f.Type).Implements(channelType) {
			return nil, fmt.Errorf("graph: state field %s.%s has type %s; use graph.Value[%s], graph.Append[E] or graph.Keyed[V]",
				t.Name(), f.Name, f.Type, f.Type)
		}
		name := f.Name
		if tag := f.Tag.Get("json"); tag != "" {
			if n, _, _ := strings.Cut(tag, ","); n != "" && n != "-" {
				name = n
			}
		}
		if _, dup := s.byName[name]; dup {
			return nil, fmt.Errorf("graph: state field name %q is used twice", name)
		}
		s.byName[name] = len(s.fields)
		ops := reflect.Zero(reflect.PointerTo(f.Type)).Interface().(channel)
		s.fields = append(s.fields, field{name: name, goName: f.Name, index: i, offset: f.Offset, typ: f.Type, ops: ops})
	}
	return s, nil
}

// ch returns field f of *s as a channel.
func (sc *schema[S]) ch(s *S, f *field) channel {
	p := unsafe.Add(unsafe.Pointer(s), f.offset)
	return reflect.NewAt(f.typ, p).Interface().(channel)
}

// merge folds update u into s.
func (sc *schema[S]) merge(s, u *S) {
	ps, pu := unsafe.Pointer(s), unsafe.Pointer(u)
	for i := range sc.fields {
		f := &sc.fields[i]
		f.ops.mergeAt(unsafe.Add(ps, f.offset), unsafe.Add(pu, f.offset))
	}
}

// encodeUpdate appends the JSON object of u's written channels to buf.
func (sc *schema[S]) encodeUpdate(buf []byte, u *S) ([]byte, error) {
	return sc.encode(buf, u, false)
}

// encodeFull appends the JSON object of the whole state.
func (sc *schema[S]) encodeFull(buf []byte, s *S) ([]byte, error) {
	return sc.encode(buf, s, true)
}

// encode appends the JSON object of s: of its written channels as deltas,
// or (full) of all of them whole but the Values never set, which are left
// out so that they decode as unset.
func (sc *schema[S]) encode(buf []byte, s *S, full bool) ([]byte, error) {
	buf = append(buf, '{')
	first := true
	for i := range sc.fields {
		f := &sc.fields[i]
		c := sc.ch(s, f)
		if full {
			if v, ok := c.(interface{ unset() bool }); ok && v.unset() {
				continue
			}
		} else if !c.written() {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		var err error
		if buf, err = appendJSONString(buf, f.name); err != nil {
			return nil, serializationError(c, f, err)
		}
		buf = append(buf, ':')
		if full {
			buf, err = c.appendFull(buf)
		} else {
			buf, err = c.appendDelta(buf)
		}
		if err != nil {
			return nil, serializationError(c, f, err)
		}
	}
	return append(buf, '}'), nil
}

// applyUpdate folds an encoded update into s.
func (sc *schema[S]) applyUpdate(s *S, data []byte) error {
	return sc.decode(s, data, "update", channel.applyDelta)
}

// decodeFull decodes a state written by encodeFull.
func (sc *schema[S]) decodeFull(data []byte) (S, error) {
	var s S
	err := sc.decode(&s, data, "snapshot", channel.setFull)
	return s, err
}

// decode applies each field of the JSON object data to its channel of s
// with apply; what names the object in errors.
func (sc *schema[S]) decode(s *S, data []byte, what string, apply func(channel, []byte) error) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	for name, raw := range m {
		i, ok := sc.byName[name]
		if !ok {
			return fmt.Errorf("decode %s: unknown state field %q", what, name)
		}
		if err := apply(sc.ch(s, &sc.fields[i]), raw); err != nil {
			return fmt.Errorf("decode %s of state.%s: %w", what, name, err)
		}
	}
	return nil
}

// SerializationError reports a state value that cannot be serialized, with
// its path in the state, such as state.tasks["t1"].score.
type SerializationError struct {
	Path string
	Err  error
}

func (e *SerializationError) Error() string {
	return fmt.Sprintf("serialize %s: %v", e.Path, e.Err)
}

func (e *SerializationError) Unwrap() error { return e.Err }

func serializationError(c channel, f *field, err error) error {
	prefix := "state." + f.name
	path := c.locate(prefix)
	if path == "" {
		path = prefix
	}
	return &SerializationError{Path: path, Err: err}
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// locateValue returns the path of the first value below v that encoding/json
// cannot encode, or "".
func locateValue(v reflect.Value, path string) string {
	return locate(v, path, 0)
}

func locate(v reflect.Value, path string, depth int) string {
	if depth > 64 || !v.IsValid() {
		return ""
	}
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface && v.CanInterface() {
		if v.Type().Implements(jsonMarshalerType) {
			if _, err := v.Interface().(json.Marshaler).MarshalJSON(); err != nil {
				return path
			}
			return ""
		}
		if v.CanAddr() && reflect.PointerTo(v.Type()).Implements(jsonMarshalerType) {
			if _, err := v.Addr().Interface().(json.Marshaler).MarshalJSON(); err != nil {
				return path
			}
			return ""
		}
		if v.Type().Implements(textMarshalerType) {
			if _, err := v.Interface().(encoding.TextMarshaler).MarshalText(); err != nil {
				return path
			}
			return ""
		}
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return path
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return locate(v.Elem(), path, depth+1)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p := locate(v.Index(i), path+"["+strconv.Itoa(i)+"]", depth+1); p != "" {
				return p
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if p := locate(it.Value(), path+"["+strconv.Quote(fmt.Sprint(it.Key().Interface()))+"]", depth+1); p != "" {
				return p
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if tag := f.Tag.Get("json"); tag != "" {
				n, _, _ := strings.Cut(tag, ",")
				if n == "-" {
					continue
				}
				if n != "" {
					name = n
				}
			}
			if p := locate(v.Field(i), path+"."+name, depth+1); p != "" {
				return p
			}
		}
	}
	return ""
}
