package agent

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// CommandPolicy decides which execute_command calls may run. It is a
// convenience for steering the model, not the protection: the sandbox and
// the ref guard are what keep a worker in its worktree.
//
// The command is parsed as the shell will run it (mvdan.cc/sh), and every
// simple command in it is checked, including those inside subshells,
// pipelines, `sh -c '…'` scripts and after wrappers such as env, command,
// exec, nohup, time and nice. A program is named by its base name
// (/usr/bin/git is git), and git's global options (-C DIR, -c KEY=VALUE,
// --git-dir, …) are skipped, so `git -C . push` is `git push`.
//
// A command matches a prefix when its words start with the prefix's
// words. A command matching a Deny prefix is refused unless a longer
// Allow prefix matches it too. When Allow is not empty, a command must
// match one of its prefixes ("*" allows everything not denied). When
// either list is set, command substitution ($(…), backticks, <(…)) and a
// program named by a variable are refused, because what they run cannot
// be checked.
type CommandPolicy struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Check returns nil when command may run, or an error saying which part
// was refused and why.
func (p CommandPolicy) Check(command string) error {
	if strings.TrimSpace(command) == "" {
		return fmt.Errorf("the command is empty")
	}
	if len(p.Allow) == 0 && len(p.Deny) == 0 {
		return nil
	}
	cmds, err := simpleCommands(command, 0)
	if err != nil {
		return err
	}
	for _, part := range cmds {
		deny := longestPrefix(part, p.Deny)
		allow := longestPrefix(part, p.Allow)
		if containsStar(p.Allow) && allow < 0 {
			allow = 0
		}
		if deny >= 0 && deny >= allow {
			return fmt.Errorf("%q is denied by the command policy (denied prefixes: %s)", part, strings.Join(p.Deny, ", "))
		}
		if len(p.Allow) > 0 && allow < 0 {
			return fmt.Errorf("%q is not in the command policy's allow list (allowed prefixes: %s)", part, strings.Join(p.Allow, ", "))
		}
	}
	return nil
}

// maxScriptDepth bounds nested `sh -c` scripts.
const maxScriptDepth = 4

var errSubstitution = errors.New("command substitution ($(…), backticks, <(…), >(…)) is not allowed by the command policy")

// simpleCommands parses a shell script and returns each simple command it
// runs, as its normalized words joined by spaces.
func simpleCommands(script string, depth int) ([]string, error) {
	if depth > maxScriptDepth {
		return nil, errors.New("sh -c scripts nest too deep for the command policy")
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		return nil, fmt.Errorf("the command policy cannot parse the command: %v", err)
	}
	var out []string
	var walkErr error
	syntax.Walk(f, func(n syntax.Node) bool {
		if walkErr != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			walkErr = errSubstitution
			return false
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				return true
			}
			words := make([]string, len(n.Args))
			dynamic := make([]bool, len(n.Args))
			for i, w := range n.Args {
				words[i], dynamic[i] = wordText(w)
			}
			cmds, err := normalize(words, dynamic, depth)
			if err != nil {
				walkErr = err
				return false
			}
			out = append(out, cmds...)
		}
		return true
	})
	return out, walkErr
}

// wordText returns a word's text as the shell would see it, and whether
// part of it is only known at run time (a variable, say).
func wordText(w *syntax.Word) (string, bool) {
	var b strings.Builder
	dynamic := false
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				b.WriteString(p.Value)
			case *syntax.SglQuoted:
				b.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			case *syntax.ParamExp:
				dynamic = true
				b.WriteString("$" + p.Param.Value)
			default:
				dynamic = true
				b.WriteString("$…")
			}
		}
	}
	parts(w.Parts)
	return b.String(), dynamic
}

// normalize turns one simple command's words into the commands the policy
// checks: wrappers are peeled off, the program is named by its base name,
// git's global options are skipped and `sh -c` scripts are parsed.
func normalize(words []string, dynamic []bool, depth int) ([]string, error) {
	for len(words) > 0 {
		if dynamic[0] {
			return nil, fmt.Errorf("%q names its program with a variable, which the command policy cannot check", strings.Join(words, " "))
		}
		prog := path.Base(words[0])
		skip := 0
		switch prog {
		case "env":
			skip = 1
			for skip < len(words) && (strings.HasPrefix(words[skip], "-") || strings.Contains(words[skip], "=")) {
				if words[skip] == "-u" || words[skip] == "-C" || words[skip] == "-S" {
					skip++
				}
				skip++
			}
		case "command", "exec", "nohup", "builtin":
			skip = 1
			for skip < len(words) && strings.HasPrefix(words[skip], "-") {
				skip++
			}
		case "time":
			skip = 1
			for skip < len(words) && strings.HasPrefix(words[skip], "-") {
				skip++
			}
		case "nice":
			skip = 1
			for skip < len(words) && strings.HasPrefix(words[skip], "-") {
				if words[skip] == "-n" {
					skip++
				}
				skip++
			}
		case "sh", "bash", "dash", "zsh", "ksh":
			for i := 1; i < len(words); i++ {
				if words[i] == "-c" && i+1 < len(words) {
					if dynamic[i+1] {
						return nil, fmt.Errorf("%s -c runs a script built at run time, which the command policy cannot check", prog)
					}
					return simpleCommands(words[i+1], depth+1)
				}
			}
		case "git":
			return []string{strings.Join(append([]string{"git"}, gitSubcommand(words[1:])...), " ")}, nil
		}
		if skip == 0 {
			return []string{strings.Join(append([]string{prog}, words[1:]...), " ")}, nil
		}
		words, dynamic = words[skip:], dynamic[skip:]
	}
	return nil, nil
}

// gitSubcommand drops git's global options before its subcommand.
func gitSubcommand(args []string) []string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" ||
			a == "--config-env" || a == "--exec-path" || a == "--super-prefix":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return args[i:]
		}
	}
	return nil
}

func containsStar(list []string) bool {
	for _, s := range list {
		if strings.TrimSpace(s) == "*" {
			return true
		}
	}
	return false
}

// longestPrefix returns the length of the longest prefix in list that part
// matches, or -1.
func longestPrefix(part string, list []string) int {
	best := -1
	for _, raw := range list {
		pre := normalizeSpace(raw)
		if pre == "" || pre == "*" {
			continue
		}
		if part == pre || strings.HasPrefix(part, pre+" ") {
			best = max(best, len(pre))
		}
	}
	return best
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }
