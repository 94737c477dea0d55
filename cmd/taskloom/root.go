package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/internal/session"
)

// Exit codes, as documented for users.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitReview      = 3
	exitFailed      = 4
	exitPartial     = 5
	exitInterrupted = 130
)

// exitCodeError carries an exit code other than 1 out of a command.
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
	newWorkerCmd,
	newRunCmd,
	newResumeCmd,
	newDemoCmd,
	newPlanCmd,
	newReplanCmd,
	newReviewCmd,
	newStatusCmd,
	newRunsCmd,
	newHistoryCmd,
	newDoctorCmd,
	newInitCmd,
	newConfigCmd,
	newVersionCmd,
	newUICmd,
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
		// A value that does not parse is named with the flag's type, not
		// with the Go parser's words ("strconv.ParseInt: …").
		var bad *pflag.InvalidValueError
		if errors.As(err, &bad) {
			err = fmt.Errorf("--%s wants %s, got %q", bad.GetFlag().Name, flagKind(bad.GetFlag()), bad.GetValue())
		}
		return withCode(exitUsage, err)
	})
	// An unknown command and wrong arguments are usage errors (exit 2),
	// typed as such rather than recognised by their words.
	root.Args = cobra.ArbitraryArgs
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return usageError("unknown command %q for \"taskloom\"; see taskloom --help", args[0])
	}
	for _, c := range commands {
		sub := c(a)
		if check := sub.Args; check != nil {
			sub.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return withCode(exitUsage, fmt.Errorf("%s: %w; usage: %s", cmd.Name(), err, cmd.UseLine()))
				}
				return nil
			}
		}
		root.AddCommand(sub)
	}
	return root
}

// Execute runs the CLI with args and returns the process exit code.
// A panic is one line on stderr naming a crash file that holds its stack.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "taskloom: internal error: %v; %s\n", p, writeCrash(p, debug.Stack()))
			code = exitError
		}
	}()
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	flags := ""
	if cmd != nil {
		flags = nextFlags(cmd)
	}
	return reportError(err, stderr, flags)
}

// reportError prints the line a failed command ends with and returns its exit
// code. A panic that the graph runtime caught in a node is reported as
// one caught here is: one line, its stack in a crash file.
func reportError(err error, stderr io.Writer, flags string) int {
	var perr *graph.PanicError
	if errors.As(err, &perr) {
		fmt.Fprintf(stderr, "taskloom: internal error: %v; %s\n", err, writeCrash(perr.Value, perr.Stack))
		return exitError
	}
	code := exitError
	var ce *exitCodeError
	if errors.As(err, &ce) {
		code = ce.code
	}
	var decode *checkpoint.DecodeError
	if errors.As(err, &decode) {
		// Whichever command read it, a damaged checkpoint is named the
		// same way: its run and its step, and the way on with the flags
		// that find its store.
		err = session.DecodeFault(decode, flags)
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "taskloom: %s\n", msg)
	}
	return code
}

// nextFlags is what a taskloom command printed for the user to run next
// needs to find the same run: the --repo and --db given on this command
// line, the repo made absolute and the password masked, or "". The repo's
// own store, or one TASKLOOM_DB or the config names, the next command finds
// the same way without them.
func nextFlags(cmd *cobra.Command) string {
	var out string
	// A repo named on the command line is named again, absolute, so that
	// the command works from wherever it is pasted.
	if f := cmd.Flags().Lookup("repo"); f != nil && f.Changed && f.Value.String() != "" {
		repo := f.Value.String()
		if abs, err := filepath.Abs(repo); err == nil {
			repo = abs
		}
		out += " --repo " + review.ShellQuote(repo)
	}
	if f := cmd.Flags().Lookup("db"); f != nil && f.Changed && f.Value.String() != "" {
		out += " --db " + review.ShellQuote(config.RedactURL(f.Value.String()))
	}
	return out
}

// runIDOpts are the options of a command that takes an optional RUN_ID.
type runIDOpts interface {
	Validate() error
	Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error
}

// runIDRunE returns a RunE that stores the RUN_ID argument, if given, in
// runID, validates o and runs it.
func runIDRunE(a *app, o runIDOpts, runID *string) func(*cobra.Command, []string) error {
	run := optsRunE(a, o)
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			*runID = args[0]
		}
		return run(cmd, args)
	}
}

// noArgsCmd is a command without arguments that validates o and runs it.
func noArgsCmd(a *app, o runIDOpts, use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: optsRunE(a, o)}
}

// optsRunE returns a RunE that validates o and runs it.
func optsRunE(a *app, o runIDOpts) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context(), cmd, a.stdout)
	}
}

// repoOpts are the options of a command on a repo: --repo, "." when
// empty.
type repoOpts struct{ Repo string }

// Validate implements the command options contract.
func (o *repoOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

// addStoreFlags adds --repo and --db: where the store that holds the runs
// is.
func addStoreFlags(f *pflag.FlagSet, repo *string) {
	f.StringVar(repo, "repo", ".", "the git repo whose store holds the run")
	f.String("db", "", "store URL: postgres://… or a SQLite path (default: <repo>/.taskloom/taskloom.db)")
}

// openSession opens the session of a command: its repo, config file and
// flags; readOnly for the commands that only read.
func openSession(ctx context.Context, cmd *cobra.Command, repo, configFile string, readOnly bool) (*session.Session, error) {
	return session.Open(ctx, session.Opts{Repo: repo, ConfigFile: configFile, Flags: cmd.Flags(), ReadOnly: readOnly, Stderr: cmd.ErrOrStderr()})
}

// openRunSession opens the session of a command on a run already there
// (resume, review, replan): it never creates the repo's store.
func openRunSession(ctx context.Context, cmd *cobra.Command, repo string) (*session.Session, error) {
	return session.Open(ctx, session.Opts{Repo: repo, Flags: cmd.Flags(), Existing: true, Stderr: cmd.ErrOrStderr()})
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeCrash writes a panic and its stack to a crash file and says where
// it is, for a bug report.
func writeCrash(p any, stack []byte) string {
	dir := filepath.Join(os.TempDir(), "taskloom-crashes")
	path := filepath.Join(dir, "crash-"+time.Now().UTC().Format("20060102T150405.000000000")+".txt")
	body := fmt.Sprintf("taskloom %s\npanic: %v\n\n%s", versionString(), p, stack)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "the crash report could not be written: " + err.Error()
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "the crash report could not be written: " + err.Error()
	}
	return "crash report: " + path + " (please attach it to a bug report)"
}

// flagKind names what a flag takes, for an error about its value.
func flagKind(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "int", "int64", "uint", "float64":
		return "a number"
	case "duration":
		return "a duration such as 30s or 5m"
	case "bool":
		return "true or false"
	default:
		return "a " + t
	}
}
