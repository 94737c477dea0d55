package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// Exit codes, as SPEC §1 fixes them.
const (
	exitOK     = 0
	exitError  = 1
	exitUsage  = 2
	exitReview = 3
	exitFailed = 4
)

// exitError carries an exit code other than 1 out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitCodeError) Unwrap() error { return e.err }

// withCode wraps err so that the process exits with code.
func withCode(code int, err error) error { return &exitCodeError{code: code, err: err} }

// usageError marks a command-line usage problem (exit 2).
func usageError(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// app holds what every command shares: its streams.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// commands lists the constructors of taskloom's sub-commands.
var commands = []func(*app) *cobra.Command{
	newMigrateCmd,
	newRunCmd,
	newResumeCmd,
	newDemoCmd,
	newPlanCmd,
	newReviewCmd,
	newStatusCmd,
	newRunsCmd,
	newHistoryCmd,
	newDoctorCmd,
	newInitCmd,
	newConfigCmd,
	newVersionCmd,
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Version:       versionString(),
		Use:           "taskloom",
		Short:         "Turn a PRODUCT.md into working, tested code",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return withCode(exitUsage, err)
	})
	for _, c := range commands {
		root.AddCommand(c(a))
	}
	return root
}

// Execute runs the CLI with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitError
	var ce *exitCodeError
	if errors.As(err, &ce) {
		code = ce.code
	} else if strings.HasPrefix(err.Error(), "unknown command") || strings.Contains(err.Error(), "accepts ") {
		code = exitUsage
	}
	var decode *checkpoint.DecodeError
	var fault *faultError
	if errors.As(err, &decode) && !errors.As(err, &fault) {
		// Whichever command read it, a damaged checkpoint is named the
		// same way: its run and its step.
		err = decodeFault(decode)
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "taskloom: %s\n", msg)
	}
	return code
}

// runIDOpts are the options of a command that takes an optional RUN_ID.
type runIDOpts interface {
	Validate() error
	Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error
}

// runIDRunE returns a RunE that stores the RUN_ID argument, if given, in
// runID, validates o and runs it.
func runIDRunE(a *app, o runIDOpts, runID *string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			*runID = args[0]
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context(), cmd, a.stdout)
	}
}

// addStoreFlags adds --repo and --db: where the store that holds the runs
// is.
func addStoreFlags(f *pflag.FlagSet, repo *string) {
	f.StringVar(repo, "repo", ".", "the git repo whose store holds the run")
	f.String("db", "", "store URL: postgres://… or a SQLite path (default: <repo>/.taskloom/taskloom.db)")
}
