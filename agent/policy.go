package agent

import (
	"fmt"
	"strings"
)

// CommandPolicy decides which execute_command calls may run. A command is
// split into its parts at &&, ||, ;, |, & and newlines (outside quotes);
// every part must pass. A part matches a prefix when it equals the prefix
// or continues it after a space. A part matching a Deny prefix is refused
// unless a longer Allow prefix matches it too. When Allow is not empty, a
// part must match one of its prefixes ("*" allows everything not denied).
// When either list is set, command substitution ($(…), backticks, <(…))
// is refused, because the commands inside could not be checked.
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
	if hasSubstitution(command) {
		return fmt.Errorf("command substitution ($(…), backticks, <(…), >(…)) is not allowed by the command policy")
	}
	for _, part := range splitCommand(command) {
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

func hasSubstitution(cmd string) bool {
	inSingle := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\'':
			inSingle = !inSingle
		case inSingle:
		case c == '\\':
			i++
		case c == '`':
			return true
		case c == '$' && strings.HasPrefix(cmd[i:], "$(("):
			i += 2 // arithmetic expansion; a $( inside it is still found
		case (c == '$' || c == '<' || c == '>') && i+1 < len(cmd) && cmd[i+1] == '(':
			return true
		}
	}
	return false
}

// splitCommand splits a shell command into its simple commands, with
// leading environment assignments (FOO=bar cmd) removed.
func splitCommand(cmd string) []string {
	var parts []string
	var cur strings.Builder
	inSingle, inDouble := false, false
	flush := func() {
		if s := stripAssignments(normalizeSpace(cur.String())); s != "" {
			parts = append(parts, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\\' && !inSingle && i+1 < len(cmd):
			cur.WriteByte(c)
			i++
			cur.WriteByte(cmd[i])
			continue
		case c == '\'' && !inDouble:
			inSingle = !inSingle
		case c == '"' && !inSingle:
			inDouble = !inDouble
		case !inSingle && !inDouble && c == '&' && isRedirect(cmd, i):
			// 2>&1, >&2, &>file: a redirection, not a separator.
		case !inSingle && !inDouble && (c == ';' || c == '\n' || c == '|' || c == '&'):
			flush()
			continue
		}
		cur.WriteByte(c)
	}
	flush()
	return parts
}

func isRedirect(cmd string, i int) bool {
	return (i > 0 && (cmd[i-1] == '>' || cmd[i-1] == '<')) || (i+1 < len(cmd) && cmd[i+1] == '>')
}

func stripAssignments(s string) string {
	fields := strings.Fields(s)
	i := 0
	for i < len(fields) {
		name, _, ok := strings.Cut(fields[i], "=")
		if !ok || name == "" || strings.ContainsAny(name, "'\"$/") {
			break
		}
		i++
	}
	return strings.Join(fields[i:], " ")
}
