package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/session"
)

// configOpts are the options of taskloom config.
type configOpts struct {
	repoOpts
	ConfigFile string
	JSON       bool
}

func newConfigCmd(a *app) *cobra.Command {
	o := &configOpts{}
	cmd := noArgsCmd(a, o, "config", "Print the effective config and where each value comes from (default, file, env, flag)")
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "the repo whose .project-config.json is read")
	f.StringVar(&o.ConfigFile, "config", "", "a config file to read instead of the repo's")
	f.BoolVar(&o.JSON, "json", false, `print {"values", "sources", "secrets"} as JSON`)
	f.String("db", "", "store URL (overrides database.url)")
	f.String("model", "", "model spec (overrides model)")
	f.Int("workers", 0, "parallel workers (overrides parallel_workers)")
	return cmd
}

// Run prints the effective config. Secrets are only said to be set or
// unset; a database URL's password is masked.
func (o *configOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	dir, err := filepath.Abs(o.Repo)
	if err != nil {
		return err
	}
	rep, err := config.Describe(session.LoadOpts(cmd.Flags(), session.RepoDir(ctx, dir), o.ConfigFile))
	return writeReport(w, o.JSON, rep, err, func() error { return rep.Write(w) })
}
