package main

import (
	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
)

// configFlagKeys maps the flags that run, resume and plan share to config
// keys. A command that lacks one of these flags simply does not override
// that key.
var configFlagKeys = map[string]string{
	"model":   "model",
	"workers": "parallel_workers",
	"db":      "database.url",
}

// loadConfig loads the config of the repo at repoDir with the documented
// precedence: cmd's flags (--model, --workers, --db) when the user set them,
// then TASKLOOM_* variables, then the config file, then the defaults. The
// file is configFile when set, else the value of cmd's --config flag when
// set, else repoDir's .project-config.json.
func loadConfig(cmd *cobra.Command, repoDir, configFile string) (config.Config, error) {
	flags := cmd.Flags()
	if configFile == "" {
		if f := flags.Lookup("config"); f != nil && f.Changed {
			configFile = f.Value.String()
		}
	}
	return config.Load(config.LoadOpts{
		RepoDir:    repoDir,
		ConfigFile: configFile,
		Flags:      flags,
		FlagKeys:   configFlagKeys,
	})
}
