package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kind is the JSON shape a key accepts.
type kind int

const (
	kindObject kind = iota
	kindString
	kindInt
	kindFloat
	kindBool
	kindDuration
	kindList // of elem
	kindMap  // string keys, values of elem
)

// node describes the keys under one key of Config.
type node struct {
	kind   kind
	fields []field // kindObject, in struct order
	elem   *node   // kindList, kindMap
}

type field struct {
	name string
	node *node
}

func (n *node) field(name string) *node {
	for _, f := range n.fields {
		if f.name == name {
			return f.node
		}
	}
	return nil
}

var durationType = reflect.TypeFor[Duration]()

// schema is the shape of Config, built from its json tags.
var schema = sync.OnceValue(func() *node { return nodeOf(reflect.TypeFor[Config]()) })

func nodeOf(t reflect.Type) *node {
	if t == durationType {
		return &node{kind: kindDuration}
	}
	switch t.Kind() {
	case reflect.String:
		return &node{kind: kindString}
	case reflect.Int, reflect.Int64:
		return &node{kind: kindInt}
	case reflect.Float64:
		return &node{kind: kindFloat}
	case reflect.Bool:
		return &node{kind: kindBool}
	case reflect.Slice:
		return &node{kind: kindList, elem: nodeOf(t.Elem())}
	case reflect.Map:
		return &node{kind: kindMap, elem: nodeOf(t.Elem())}
	case reflect.Struct:
		n := &node{kind: kindObject}
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			n.fields = append(n.fields, field{name: name, node: nodeOf(sf.Type)})
		}
		return n
	}
	panic(fmt.Sprintf("config: unsupported field type %s", t))
}

// leaf is a key that takes one value from a layer: a scalar, a list or a
// map. Objects are not leaves; lists of objects and maps are, but they get
// no environment variable.
type leaf struct {
	key  string
	node *node
	env  []string // environment variable names, first wins
}

// leaves lists the leaf keys of Config in struct order.
var leaves = sync.OnceValue(func() []leaf {
	var out []leaf
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		for _, f := range n.fields {
			key := f.name
			if prefix != "" {
				key = prefix + "." + f.name
			}
			if f.node.kind == kindObject {
				walk(key, f.node)
				continue
			}
			l := leaf{key: key, node: f.node}
			if f.node.kind != kindMap && (f.node.kind != kindList || f.node.elem.kind != kindObject) {
				l.env = envNames(key)
			}
			out = append(out, l)
		}
	}
	walk("", schema())
	return out
})

// envNames returns the environment variables of key: TASKLOOM_ and the key
// uppercased with "_" for ".", plus TASKLOOM_DB for database.url.
func envNames(key string) []string {
	name := "TASKLOOM_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
	if key == "database.url" {
		return []string{"TASKLOOM_DB", name}
	}
	return []string{name}
}

func findLeaf(key string) (leaf, bool) {
	for _, l := range leaves() {
		if l.key == key {
			return l, true
		}
	}
	return leaf{}, false
}

// checkFile reports the unknown keys and wrongly typed values of a decoded
// config file (decoded with json.Decoder.UseNumber).
func checkFile(file string, v any) problems {
	c := fileChecker{file: file}
	if _, ok := v.(map[string]any); !ok {
		c.p = append(c.p, &KeyError{Key: "(top level)", Rule: "must be a JSON object, got " + describe(v), Source: file})
		return c.p
	}
	c.check("", v, schema())
	return c.p
}

type fileChecker struct {
	file string
	p    problems
}

func (c *fileChecker) bad(key, rule string, v any) {
	c.p = append(c.p, &KeyError{Key: key, Rule: rule + ", got " + describe(v), Source: c.file})
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// object returns v as an object, or reports that it is not one and
// returns nil.
func (c *fileChecker) object(key string, v any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.bad(key, "must be an object", v)
	}
	return m
}

func (c *fileChecker) check(key string, v any, n *node) {
	switch n.kind {
	case kindObject:
		m := c.object(key, v)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if f := n.field(name); f != nil {
				c.check(join(key, name), m[name], f)
				continue
			}
			e := &UnknownKeyError{Key: join(key, name), File: c.file, Credential: isCredential(name)}
			if !e.Credential {
				e.Suggestion = suggest(key, name, n)
			}
			c.p = append(c.p, e)
		}
	case kindMap:
		m := c.object(key, v)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if strings.TrimSpace(name) == "" || strings.Contains(name, ".") {
				c.p = append(c.p, &KeyError{Key: join(key, name), Rule: `names must be non-empty and must not contain "."`, Source: c.file})
				continue
			}
			c.check(join(key, name), m[name], n.elem)
		}
	case kindList:
		l, ok := v.([]any)
		if !ok {
			c.bad(key, "must be an array", v)
			return
		}
		for i, e := range l {
			c.check(fmt.Sprintf("%s[%d]", key, i), e, n.elem)
		}
	default:
		if _, rule, ok := scalarFromJSON(n.kind, v); !ok {
			c.bad(key, rule, v)
		}
	}
}

// scalarFromJSON converts a decoded JSON value to the Go value of kind k. On
// failure it returns the rule the value broke.
func scalarFromJSON(k kind, v any) (any, string, bool) {
	switch k {
	case kindString:
		s, ok := v.(string)
		return s, "must be a string", ok
	case kindBool:
		b, ok := v.(bool)
		return b, "must be true or false", ok
	case kindInt:
		const rule = "must be an integer"
		num, ok := v.(json.Number)
		if !ok {
			return nil, rule, false
		}
		if i, err := num.Int64(); err == nil {
			return int(i), "", true
		}
		f, err := num.Float64()
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, rule, false
		}
		return int(f), "", true
	case kindFloat:
		num, ok := v.(json.Number)
		if !ok {
			return nil, "must be a number", false
		}
		f, err := num.Float64()
		return f, "must be a number", err == nil
	case kindDuration:
		s, ok := v.(string)
		if !ok {
			return nil, "must be a duration string like \"10m\" or \"1h30m\"", false
		}
		d, err := time.ParseDuration(strings.TrimSpace(s))
		return Duration{d}, "must be a duration like \"10m\" or \"1h30m\"", err == nil
	}
	return nil, "unsupported", false
}

// parseText parses the text of an environment variable or a flag for a leaf
// of node n. Lists are a JSON array of strings or whitespace-separated words.
func parseText(n *node, s string) (any, string, bool) {
	s = strings.TrimSpace(s)
	switch n.kind {
	case kindString:
		return s, "", true
	case kindBool:
		b, err := strconv.ParseBool(s)
		return b, "must be true or false", err == nil
	case kindInt:
		i, err := strconv.Atoi(s)
		return i, "must be an integer", err == nil
	case kindFloat:
		f, err := strconv.ParseFloat(s, 64)
		return f, "must be a number", err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	case kindDuration:
		d, err := time.ParseDuration(s)
		return Duration{d}, "must be a duration like \"10m\" or \"1h30m\"", err == nil
	case kindList:
		if n.elem.kind != kindString {
			break
		}
		if strings.HasPrefix(s, "[") {
			var l []string
			err := json.Unmarshal([]byte(s), &l)
			return l, "must be a JSON array of strings or space-separated words", err == nil
		}
		return strings.Fields(s), "", true
	}
	return nil, "cannot be set from text", false
}

// describe renders a decoded JSON value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 60 {
			v = v[:57] + "..."
		}
		return strconv.Quote(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// isCredential reports whether a key name looks like a secret.
func isCredential(name string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	compact := strings.ReplaceAll(n, "_", "")
	return strings.Contains(compact, "apikey") || strings.Contains(n, "secret") ||
		strings.Contains(n, "password") || n == "key" || n == "token" ||
		strings.HasSuffix(n, "_key") || strings.HasSuffix(n, "_token")
}

// suggest returns the known key closest to name, an unknown key found under
// parent (node n): a sibling within a few edits, else a key elsewhere whose
// last part is close to name.
func suggest(parent, name string, n *node) string {
	limit := max(2, len(name)/3)
	best, bestD := "", limit+1
	for _, f := range n.fields {
		if d := distance(name, f.name); d < bestD {
			best, bestD = join(parent, f.name), d
		}
	}
	if best != "" {
		return best
	}
	for _, l := range allKeys() {
		last := l[strings.LastIndex(l, ".")+1:]
		if d := distance(name, last); d < bestD {
			best, bestD = l, d
		}
	}
	return best
}

// allKeys lists every key of Config, objects included, in struct order.
var allKeys = sync.OnceValue(func() []string {
	var out []string
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		for _, f := range n.fields {
			key := join(prefix, f.name)
			out = append(out, key)
			if f.node.kind == kindObject {
				walk(key, f.node)
			}
		}
	}
	walk("", schema())
	return out
})

// distance is the Levenshtein distance between a and b, with an adjacent
// transposition counted as one edit.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
