package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report is the effective config of a repo: its values with secrets
// redacted, where each comes from, and which of the secret variables
// taskloom reads are set (never their values).
type Report struct {
	Values  map[string]any    `json:"values"`
	Sources map[string]string `json:"sources"`
	Secrets map[string]string `json:"secrets"`
}

// Describe loads the config that opts names and says where each value
// comes from.
func Describe(opts LoadOpts) (Report, error) {
	cfg, err := Load(opts)
	if err != nil {
		return Report{}, err
	}
	sources, err := Sources(opts)
	if err != nil {
		return Report{}, err
	}
	var values map[string]any
	data, err := json.Marshal(cfg.Redacted())
	if err != nil {
		return Report{}, err
	}
	if err := json.Unmarshal(data, &values); err != nil {
		return Report{}, err
	}
	return Report{Values: values, Sources: sources, Secrets: secretStates(values)}, nil
}

// Write prints one "key = value  (source)" line per key, then whether
// each secret variable is set.
func (r Report) Write(w io.Writer) error {
	flat := map[string]any{}
	flatten("", r.Values, flat)
	for _, k := range slices.Sorted(maps.Keys(r.Sources)) {
		v, _ := json.Marshal(flat[k])
		fmt.Fprintf(w, "%s = %s  (%s)\n", k, v, r.Sources[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.Secrets)) {
		fmt.Fprintf(w, "%s: %s\n", k, r.Secrets[k])
	}
	return nil
}

// secretStates says which of the secret variables taskloom reads are set,
// never their values.
func secretStates(values map[string]any) map[string]string {
	names := []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "LINEAR_API_KEY", "TASKLOOM_DB"}
	if llm, ok := values["llm"].(map[string]any); ok {
		if env, ok := llm["api_key_env"].(string); ok && env != "" {
			names = append(names, env)
		}
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = "unset"
		if os.Getenv(n) != "" {
			out[n] = "set"
		}
	}
	return out
}

// flatten turns nested JSON objects into dotted keys.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if mm, ok := v.(map[string]any); ok && !strings.Contains(key, "keywords") {
			flatten(key, mm, out)
			continue
		}
		out[key] = v
	}
}

// WriteDefault writes the defaults to the config file of the repo at
// root, refusing to overwrite one, and returns its path and the project
// the repo holds. The verify and build commands are the project's (the
// defaults are Go's); its verify command is the first of Verify and
// Others that works says runs here (Verify when none does, or works is
// nil), and the returned project's Verify is that one.
func WriteDefault(root string, works func(argv []string) bool) (string, Project, error) {
	path := filepath.Join(root, FileName)
	proj := DetectProject(root)
	proj.Verify = proj.VerifyHere(works)
	cfg := Default()
	if proj.Kind != "" {
		cfg.Verify.Command, cfg.BuildVerification.Command = proj.Verify, proj.Build
		if cfg.BuildVerification.Command == nil {
			cfg.BuildVerification.Command = []string{}
		}
	}
	path, err := writeNew(path, cfg)
	return path, proj, err
}

func writeNew(path string, cfg Config) (string, error) {
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return path, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return path, fmt.Errorf("%s exists already; edit it, or delete it to start over", path)
	}
	if err != nil {
		return path, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return path, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return path, fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
