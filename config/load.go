package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// LoadOpts says where Load looks for settings.
type LoadOpts struct {
	// RepoDir is the repo whose .project-config.json is read when it
	// exists. Empty means the current directory.
	RepoDir string
	// ConfigFile, when set, is read instead of the repo's file (relative
	// paths are relative to the current directory) and must exist.
	ConfigFile string
	// Flags are the parsed command-line flags. Nil means none.
	Flags *pflag.FlagSet
	// FlagKeys maps a flag name to the key it sets, such as "workers" to
	// "parallel_workers". Only flags the user set (Changed) override; names
	// Flags does not define are skipped, so one mapping serves several
	// commands.
	FlagKeys map[string]string
}

// Load returns the config with the documented precedence: flags, then TASKLOOM_*
// environment variables, then the config file, then Default(). The result
// is validated. Errors are a *SyntaxError for malformed JSON, a
// *ValidationError listing *UnknownKeyError and *KeyError problems, or an
// I/O error.
func Load(opts LoadOpts) (Config, error) {
	v := viper.New()
	if err := setDefaults(v); err != nil {
		return Config{}, err
	}

	file, data, err := readFile(opts)
	if err != nil {
		return Config{}, err
	}
	var fileValues map[string]any
	if file != "" {
		if fileValues, err = decodeFile(file, data); err != nil {
			return Config{}, err
		}
		v.SetConfigType("json")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return Config{}, fmt.Errorf("read config file %s: %w", file, err)
		}
	}

	var p problems
	for _, l := range leaves() {
		if len(l.env) == 0 {
			continue
		}
		if err := v.BindEnv(append([]string{l.key}, l.env...)...); err != nil {
			return Config{}, fmt.Errorf("bind %s: %w", l.key, err)
		}
		if name, s := lookupEnv(l.env); name != "" {
			if _, rule, ok := parseText(l.node, s); !ok {
				p = append(p, &KeyError{Key: l.key, Rule: rule + ", got " + strconv.Quote(s), Source: name})
			}
		}
	}

	flagNames := make([]string, 0, len(opts.FlagKeys))
	for name := range opts.FlagKeys {
		flagNames = append(flagNames, name)
	}
	slices.Sort(flagNames)
	for _, name := range flagNames {
		key := opts.FlagKeys[name]
		l, ok := findLeaf(key)
		if !ok || len(l.env) == 0 {
			return Config{}, fmt.Errorf("flag --%s maps to %q, which is not a key a flag can set", name, key)
		}
		if opts.Flags == nil {
			continue
		}
		f := opts.Flags.Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		if t := f.Value.Type(); !strings.HasSuffix(t, "Slice") && !strings.HasSuffix(t, "Array") {
			if _, rule, ok := parseText(l.node, f.Value.String()); !ok {
				p = append(p, &KeyError{Key: key, Rule: rule + ", got " + strconv.Quote(f.Value.String()), Source: "--" + name})
			}
		}
		if err := v.BindPFlag(key, f); err != nil {
			return Config{}, fmt.Errorf("bind --%s: %w", name, err)
		}
	}
	if err := p.err(); err != nil {
		return Config{}, err
	}

	var cfg Config
	if err := v.UnmarshalExact(&cfg, viper.DecodeHook(decodeHook)); err != nil {
		return Config{}, fmt.Errorf("decode config: %w", err)
	}
	restoreEnvCase(&cfg, fileValues)
	if err := cfg.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			for _, pr := range ve.Problems {
				if ke, ok := pr.(*KeyError); ok {
					ke.Source = sourceOf(ke.Key, opts, file, fileValues)
				}
			}
		}
		return Config{}, err
	}
	return cfg, nil
}

// setDefaults puts Default() into v's defaults layer, one leaf at a time.
func setDefaults(v *viper.Viper) error {
	b, err := json.Marshal(Default())
	if err != nil {
		return fmt.Errorf("encode defaults: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode defaults: %w", err)
	}
	for _, l := range leaves() {
		val, ok := lookupPath(m, l.key)
		if !ok {
			continue
		}
		if mv, isMap := val.(map[string]any); isMap && len(mv) == 0 {
			continue
		}
		v.SetDefault(l.key, val)
	}
	return nil
}

// readFile returns the config file's name and content, or "" when the repo
// has no config file and none was asked for.
func readFile(opts LoadOpts) (string, []byte, error) {
	if opts.ConfigFile != "" {
		data, err := os.ReadFile(opts.ConfigFile)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, &missingFileError{file: opts.ConfigFile}
		}
		if err != nil {
			return "", nil, fmt.Errorf("read config file: %w", err)
		}
		return opts.ConfigFile, withoutBOM(data), nil
	}
	dir := opts.RepoDir
	if dir == "" {
		dir = "."
	}
	name := filepath.Join(dir, FileName)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("read config file: %w", err)
	}
	return name, withoutBOM(data), nil
}

// missingFileError is a --config file that is not there; it is an
// fs.ErrNotExist.
type missingFileError struct{ file string }

func (e *missingFileError) Error() string {
	return fmt.Sprintf("config file %s does not exist: fix --config, or leave it out to read %s in the repo", e.file, FileName)
}

func (e *missingFileError) Unwrap() error { return fs.ErrNotExist }

// withoutBOM drops the byte order mark some Windows editors put at the
// start of a UTF-8 file; JSON has none.
func withoutBOM(data []byte) []byte { return bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) }

// duplicateKey returns the first key that an object of the JSON in data
// holds twice, as a dotted path, or "": the decoder would keep the last
// silently, and the first may be the one meant.
func duplicateKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) (string, bool)
	walk = func(path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", false
				}
				key, _ := kt.(string)
				child := key
				if path != "" {
					child = path + "." + key
				}
				if seen[key] {
					return child, true
				}
				seen[key] = true
				if dup, found := walk(child); found || dup != "" {
					return dup, found
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if dup, found := walk(fmt.Sprintf("%s[%d]", path, i)); found {
					return dup, found
				}
			}
			_, _ = dec.Token()
		}
		return "", false
	}
	dup, _ := walk("")
	return dup
}

// decodeFile parses a config file and checks its keys and types.
func decodeFile(name string, data []byte) (map[string]any, error) {
	if err := json.Unmarshal(data, new(any)); err != nil {
		se := &SyntaxError{File: name, Line: 1, Column: 1, Err: err}
		var jse *json.SyntaxError
		if errors.As(err, &jse) {
			at := int(jse.Offset) - 1 // the offending byte
			if jse.Offset >= int64(len(data)) {
				at = len(data) // errors at the end point past the last byte
			}
			at = max(at, 0)
			se.Line = 1 + bytes.Count(data[:at], []byte("\n"))
			se.Column = at - bytes.LastIndexByte(data[:at], '\n')
		}
		return nil, se
	}
	if dup := duplicateKey(data); dup != "" {
		return nil, fmt.Errorf("%s: %s is written twice; keep one", name, dup)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &SyntaxError{File: name, Line: 1, Column: 1, Err: err}
	}
	if err := checkFile(name, v).err(); err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// decodeHook converts the strings of environment variables, flags and the
// file into Durations and string lists for mapstructure.
func decodeHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	switch to {
	case durationType:
		return ParseDuration(s)
	case reflect.TypeFor[[]string]():
		l, rule, ok := parseText(&node{kind: kindList, elem: &node{kind: kindString}}, s)
		if !ok {
			return nil, fmt.Errorf("%s, got %q", rule, s)
		}
		return l, nil
	}
	return data, nil
}

// lookupEnv returns the first of names set to a non-empty value, as viper
// reads them.
func lookupEnv(names []string) (string, string) {
	for _, name := range names {
		if s, ok := os.LookupEnv(name); ok && s != "" {
			return name, s
		}
	}
	return "", ""
}

// sourceOf names where the value of key came from: a flag, an environment
// variable or the config file; "" for a default.
func sourceOf(key string, opts LoadOpts, file string, fileValues map[string]any) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		key = key[:i]
	}
	for name, k := range opts.FlagKeys {
		if k != key || opts.Flags == nil {
			continue
		}
		if f := opts.Flags.Lookup(name); f != nil && f.Changed {
			return "--" + name
		}
	}
	if l, ok := findLeaf(key); ok {
		if name, _ := lookupEnv(l.env); name != "" {
			return name
		}
	}
	if _, ok := lookupPath(fileValues, key); ok {
		return file
	}
	return ""
}

// restoreEnvCase puts back the names of the MCP servers' env as the file
// writes them: viper lowercases map keys, but environment variable names
// are case-sensitive.
func restoreEnvCase(cfg *Config, fileValues map[string]any) {
	raw, ok := lookupPath(fileValues, "mcp.servers")
	list, _ := raw.([]any)
	if !ok || len(list) != len(cfg.MCP.Servers) {
		return
	}
	for i, item := range list {
		obj, _ := item.(map[string]any)
		env, ok := lookupPath(obj, "env")
		written, _ := env.(map[string]any)
		if !ok || len(written) != len(cfg.MCP.Servers[i].Env) {
			continue
		}
		fixed := make(map[string]string, len(written))
		for name := range written {
			fixed[name] = cfg.MCP.Servers[i].Env[strings.ToLower(name)]
		}
		cfg.MCP.Servers[i].Env = fixed
	}
}

// lookupPath finds a dotted key in nested maps, ignoring case as viper does.
func lookupPath(m map[string]any, key string) (any, bool) {
	var cur any = m
	for part := range strings.SplitSeq(key, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		found := false
		for k, v := range mm {
			if strings.EqualFold(k, part) {
				cur, found = v, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, true
}
