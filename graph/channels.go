package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// A channel is one field of a graph's state together with its reducer. The
// three channel types are Value (replace), Append and Keyed. A node returns
// an update: a state value in which only the channels it wrote are set.
type channel interface {
	// written reports whether an update sets this channel.
	written() bool
	// merge folds the update u (the same type) into the receiver.
	merge(u channel)
	// appendDelta appends the JSON of an update's writes.
	appendDelta(buf []byte) ([]byte, error)
	// applyDelta folds a delta written by appendDelta into the receiver.
	applyDelta(data []byte) error
	// appendFull appends the JSON of the whole channel.
	appendFull(buf []byte) ([]byte, error)
	// setFull replaces the receiver with the JSON of appendFull.
	setFull(data []byte) error
	// locate returns the path of the first value below the channel that
	// cannot be serialized, or "".
	locate(prefix string) string
	// mergeAt merges the update at u into the channel at dst, when the
	// update writes it; both point to channels of the receiver's type. It
	// serves the runtime's merges without building an interface value per
	// field, and may be called on a nil receiver.
	mergeAt(dst, u unsafe.Pointer)
}

// Value is a state field that a write replaces. The zero Value is unset.
type Value[T any] struct {
	v   T
	set bool
}

// V returns a Value set to v, for building inputs and updates.
func V[T any](v T) Value[T] { return Value[T]{v: v, set: true} }

// Get returns the value.
func (c Value[T]) Get() T { return c.v }

// IsSet reports whether the value was written.
func (c Value[T]) IsSet() bool { return c.set }

// Set writes v. In an update it replaces the state's value.
func (c *Value[T]) Set(v T) { c.v, c.set = v, true }

// MarshalJSON encodes the value.
func (c Value[T]) MarshalJSON() ([]byte, error) { return json.Marshal(c.v) }

// UnmarshalJSON decodes and sets the value.
func (c *Value[T]) UnmarshalJSON(b []byte) error {
	c.set = true
	return json.Unmarshal(b, &c.v)
}

func (c *Value[T]) written() bool { return c.set }

func (c *Value[T]) unset() bool { return !c.set }

func (*Value[T]) mergeAt(dst, u unsafe.Pointer) {
	if o := (*Value[T])(u); o.set {
		d := (*Value[T])(dst)
		d.v, d.set = o.v, true
	}
}

func (c *Value[T]) merge(u channel) {
	o := u.(*Value[T])
	c.v, c.set = o.v, true
}

func (c *Value[T]) appendDelta(buf []byte) ([]byte, error) { return appendJSON(buf, c.v) }

func (c *Value[T]) applyDelta(data []byte) error {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	c.v, c.set = v, true
	return nil
}

// appendFull writes the value; a Value never set is left out of a full
// state altogether (see encodeFull), so that one set to nil, which encodes
// as null, is still set after a restore.
func (c *Value[T]) appendFull(buf []byte) ([]byte, error) { return appendJSON(buf, c.v) }

func (c *Value[T]) setFull(data []byte) error {
	var zero T
	c.v = zero
	return c.applyDelta(data)
}

func (c *Value[T]) locate(prefix string) string {
	return locateValue(reflect.ValueOf(&c.v).Elem(), prefix)
}

// Append is a list field that a write extends: the items of an update are
// appended, in the order the updates are merged.
type Append[T any] struct {
	items []T
}

// A returns an Append holding items, for building inputs and updates.
func A[T any](items ...T) Append[T] { return Append[T]{items: items} }

// Items returns the items. The slice must not be modified.
func (c Append[T]) Items() []T { return c.items }

// Len returns the number of items.
func (c Append[T]) Len() int { return len(c.items) }

// Add appends items to an update.
func (c *Append[T]) Add(items ...T) { c.items = append(c.items, items...) }

// MarshalJSON encodes the items as a JSON array.
func (c Append[T]) MarshalJSON() ([]byte, error) {
	if c.items == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.items)
}

// UnmarshalJSON decodes a JSON array.
func (c *Append[T]) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &c.items) }

func (c *Append[T]) written() bool { return len(c.items) > 0 }

func (*Append[T]) mergeAt(dst, u unsafe.Pointer) {
	if o := (*Append[T])(u); len(o.items) > 0 {
		(*Append[T])(dst).merge(o)
	}
}

func (c *Append[T]) merge(u channel) {
	c.items = append(c.items, u.(*Append[T]).items...)
}

func (c *Append[T]) appendDelta(buf []byte) ([]byte, error) { return appendJSON(buf, c.items) }

func (c *Append[T]) applyDelta(data []byte) error {
	var items []T
	if err := json.Unmarshal(data, &items); err != nil {
		return err
	}
	c.items = append(c.items, items...)
	return nil
}

func (c *Append[T]) appendFull(buf []byte) ([]byte, error) {
	if c.items == nil {
		return append(buf, "[]"...), nil
	}
	return appendJSON(buf, c.items)
}

func (c *Append[T]) setFull(data []byte) error {
	c.items = nil
	return c.applyDelta(data)
}

func (c *Append[T]) locate(prefix string) string {
	for i := range c.items {
		if p := locateValue(reflect.ValueOf(&c.items[i]).Elem(), prefix+"["+strconv.Itoa(i)+"]"); p != "" {
			return p
		}
	}
	return ""
}

// Keyed is a collection of values by string key, merged by key: an update's
// entries replace the state's entries of the same keys and new keys are
// added at the end. Keys keep their insertion order. A checkpoint stores
// only the entries an update wrote.
//
// Entries sit in two parallel slices in key order, so that reading them in
// order (All, Values) touches no map; a small index from key to position,
// built once the collection outgrows a linear scan, serves Get.
type Keyed[V any] struct {
	keys []string
	vals []V
	idx  map[string]int // position by key; nil while len(keys) <= keyedScanMax
	del  []string       // keys an update deletes
}

// keyedScanMax is the size up to which Keyed finds keys by a linear scan
// instead of an index: an update usually holds one entry or a few.
const keyedScanMax = 8

// K returns a Keyed holding the given keys and values, in order, for
// building inputs. keyOf gives each value's key.
func K[V any](keyOf func(V) string, values ...V) Keyed[V] {
	var c Keyed[V]
	for _, v := range values {
		c.Put(keyOf(v), v)
	}
	return c
}

// find returns the position of key, or -1.
func (c *Keyed[V]) find(key string) int {
	if c.idx != nil {
		if i, ok := c.idx[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range c.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// Get returns the value at key.
func (c Keyed[V]) Get(key string) (V, bool) {
	if i := c.find(key); i >= 0 {
		return c.vals[i], true
	}
	var zero V
	return zero, false
}

// Len returns the number of entries.
func (c Keyed[V]) Len() int { return len(c.keys) }

// Keys returns the keys in insertion order. The slice must not be modified.
func (c Keyed[V]) Keys() []string { return c.keys }

// Values returns the values in key order.
func (c Keyed[V]) Values() []V { return slices.Clone(c.vals) }

// All returns an iterator over the keys and values in key order. It reads
// no index: prefer it to Keys and Get for a scan.
func (c Keyed[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for i, k := range c.keys {
			if !yield(k, c.vals[i]) {
				return
			}
		}
	}
}

// Put sets key to v in an update.
func (c *Keyed[V]) Put(key string, v V) {
	if i := c.find(key); i >= 0 {
		c.vals[i] = v
	} else {
		c.keys = append(c.keys, key)
		c.vals = append(c.vals, v)
		if c.idx != nil {
			c.idx[key] = len(c.keys) - 1
		} else if len(c.keys) > keyedScanMax {
			c.reindex(0)
		}
	}
	for i, d := range c.del {
		if d == key {
			c.del = append(c.del[:i], c.del[i+1:]...)
			break
		}
	}
}

// reindex sets the index of the keys from position from on, creating the
// index when there is none.
func (c *Keyed[V]) reindex(from int) {
	if c.idx == nil {
		c.idx = make(map[string]int, len(c.keys))
		from = 0
	}
	for i := from; i < len(c.keys); i++ {
		c.idx[c.keys[i]] = i
	}
}

// Delete removes key in an update.
func (c *Keyed[V]) Delete(key string) {
	c.remove(key)
	c.del = append(c.del, key)
}

func (c *Keyed[V]) remove(key string) {
	i := c.find(key)
	if i < 0 {
		return
	}
	c.keys = slices.Delete(c.keys, i, i+1)
	c.vals = slices.Delete(c.vals, i, i+1)
	if c.idx != nil {
		delete(c.idx, key)
		c.reindex(i)
	}
}

// MarshalJSON encodes the entries as a JSON object in key order.
func (c Keyed[V]) MarshalJSON() ([]byte, error) { return c.appendEntries(nil) }

// UnmarshalJSON decodes a JSON object, keeping its key order.
func (c *Keyed[V]) UnmarshalJSON(b []byte) error {
	*c = Keyed[V]{}
	return c.putEntries(b)
}

func (c *Keyed[V]) appendEntries(buf []byte) ([]byte, error) {
	buf = append(buf, '{')
	for i, k := range c.keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = appendJSONString(buf, k); err != nil {
			return nil, err
		}
		buf = append(buf, ':')
		if buf, err = appendJSON(buf, c.vals[i]); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// putEntries puts the entries of a JSON object, in order.
func (c *Keyed[V]) putEntries(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("keyed collection: want a JSON object, got %v", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		var v V
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("entry %q: %w", key, err)
		}
		c.Put(key, v)
	}
	_, err = dec.Token()
	return err
}

func (c *Keyed[V]) written() bool { return len(c.keys) > 0 || len(c.del) > 0 }

func (*Keyed[V]) mergeAt(dst, u unsafe.Pointer) {
	if o := (*Keyed[V])(u); o.written() {
		(*Keyed[V])(dst).merge(o)
	}
}

func (c *Keyed[V]) merge(u channel) {
	o := u.(*Keyed[V])
	for _, k := range o.del {
		c.remove(k)
	}
	for i, k := range o.keys {
		c.Put(k, o.vals[i])
	}
	if c.del != nil {
		// A state never carries deletions; an accumulated update does.
		c.del = append(c.del, o.del...)
	}
}

// keyedDelta is the stored form of a Keyed update.
type keyedDelta struct {
	Put json.RawMessage `json:"p,omitempty"`
	Del []string        `json:"d,omitempty"`
}

func (c *Keyed[V]) appendDelta(buf []byte) ([]byte, error) {
	if len(c.del) == 0 {
		buf = append(buf, `{"p":`...)
		buf, err := c.appendEntries(buf)
		if err != nil {
			return nil, err
		}
		return append(buf, '}'), nil
	}
	put, err := c.appendEntries(nil)
	if err != nil {
		return nil, err
	}
	return appendJSON(buf, keyedDelta{Put: put, Del: c.del})
}

func (c *Keyed[V]) applyDelta(data []byte) error {
	var d keyedDelta
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	for _, k := range d.Del {
		c.remove(k)
	}
	if len(d.Put) == 0 {
		return nil
	}
	return c.putEntries(d.Put)
}

func (c *Keyed[V]) appendFull(buf []byte) ([]byte, error) { return c.appendEntries(buf) }

func (c *Keyed[V]) setFull(data []byte) error {
	*c = Keyed[V]{}
	return c.putEntries(data)
}

func (c *Keyed[V]) locate(prefix string) string {
	for i, k := range c.keys {
		if p := locateValue(reflect.ValueOf(&c.vals[i]).Elem(), prefix+"["+strconv.Quote(k)+"]"); p != "" {
			return p
		}
	}
	return ""
}

// appendJSONString appends s as a JSON string. A string that is not valid
// UTF-8 is an error: JSON cannot hold it, and encoding/json would replace
// its bad bytes, so that two keys could become one.
func appendJSONString(buf []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%q is not valid UTF-8, which JSON cannot hold", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return appendJSON(buf, s)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), nil
}

func appendJSON(buf []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}
