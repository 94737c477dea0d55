package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
)

// configOpts are the options of taskloom config.
type configOpts struct {
	Repo       string
	ConfigFile string
	JSON       bool
}

func newConfigCmd(a *app) *cobra.Command {
	o := &configOpts{}
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective config and where each value comes from (default, file, env, flag)",
		Args:  cobra.NoArgs,
		RunE:  optsRunE(a, o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "the repo whose .project-config.json is read")
	f.StringVar(&o.ConfigFile, "config", "", "a config file to read instead of the repo's")
	f.BoolVar(&o.JSON, "json", false, `print {"values", "sources", "secrets"} as JSON`)
	f.String("db", "", "store URL (overrides database.url)")
	f.String("model", "", "model spec (overrides model)")
	f.Int("workers", 0, "parallel workers (overrides parallel_workers)")
	return cmd
}

// Validate implements the command options contract.
func (o *configOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

// configReport is what config --json prints.
type configReport struct {
	Values  map[string]any    `json:"values"`
	Sources map[string]string `json:"sources"`
	Secrets map[string]string `json:"secrets"`
}

// Run prints the effective config. Secrets are only said to be set or
// unset; a database URL's password is masked.
func (o *configOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	dir, err := filepath.Abs(o.Repo)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(cmd, dir, o.ConfigFile)
	if err != nil {
		return err
	}
	file := o.ConfigFile
	if file == "" {
		if f := cmd.Flags().Lookup("config"); f != nil && f.Changed {
			file = f.Value.String()
		}
	}
	sources, err := config.Sources(config.LoadOpts{RepoDir: dir, ConfigFile: file, Flags: cmd.Flags(), FlagKeys: configFlagKeys})
	if err != nil {
		return err
	}
	var values map[string]any
	data, err := json.Marshal(cfg.Redacted())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &values); err != nil {
		return err
	}
	rep := configReport{Values: values, Sources: sources, Secrets: secretStates(values)}
	if o.JSON {
		return writeJSON(w, rep)
	}
	flat := map[string]any{}
	flatten("", values, flat)
	keys := make([]string, 0, len(sources))
	for k := range sources {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, _ := json.Marshal(flat[k])
		fmt.Fprintf(w, "%s = %s  (%s)\n", k, v, sources[k])
	}
	names := make([]string, 0, len(rep.Secrets))
	for k := range rep.Secrets {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(w, "%s: %s\n", k, rep.Secrets[k])
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
