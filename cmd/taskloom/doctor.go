package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/doctor"
	"github.com/taskloom/taskloom/internal/session"
)

// doctorOpts are the options of taskloom doctor.
type doctorOpts struct{ repoOpts }

func newDoctorCmd(a *app) *cobra.Command {
	o := &doctorOpts{}
	cmd := noArgsCmd(a, o, "doctor", "Check what a run needs (git, repo, store, model key, verify command, sandbox) and say what to fix")
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "the git repo to check")
	f.String("db", "", "store URL: postgres://… or a SQLite path (default: <repo>/.taskloom/taskloom.db)")
	f.String("model", "", "model spec to check the key of (default: the config's)")
	return cmd
}

// Run prints one line per check and fails (exit 1) when a run could not
// start.
func (o *doctorOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	checks, err := doctor.Run(ctx, o.Repo, func(root string) (config.Config, error) {
		return session.LoadConfig(cmd.Flags(), root, "")
	})
	if err != nil {
		return err
	}
	if failed := doctor.Write(w, checks); failed > 0 {
		return fmt.Errorf("%d check(s) failed: a run cannot start until they are fixed", failed)
	}
	fmt.Fprintln(w, "a run can start")
	return nil
}
