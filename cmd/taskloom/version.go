package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			printVersion(a.stdout)
			return nil
		},
	}
}

func printVersion(w io.Writer) { fmt.Fprintln(w, versionString()) }

// versionString is "taskloom VERSION (commit REV[, modified]) GO": the
// module version go install recorded ("(devel)" in a checkout) and the VCS
// revision go build stamped, from the binary's build info.
func versionString() string {
	version, rev, modified := "(devel)", "unknown", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if rev == "unknown" {
		// go install MODULE@VERSION stamps no VCS data, but a
		// pseudo-version ends with the commit: v0.0.0-20261124093000-abcdef123456.
		if i := strings.LastIndexByte(version, '-'); i > 0 && len(version)-i-1 == 12 {
			rev = version[i+1:]
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += ", modified"
	}
	return fmt.Sprintf("taskloom %s (commit %s) %s", version, rev, runtime.Version())
}
