package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/safefile"
)

// callOutcome is what one tool call produced.
type callOutcome struct {
	content string
	isError bool
	// rejected: validation refused the call; nothing ran.
	rejected bool
	// failed: the call did not do what was asked (counts against
	// attempt_completion in the same turn) without being a mistake, for
	// example a command that exited non-zero.
	failed bool
	// mistake counts towards the consecutive-mistake limit.
	mistake bool
	// noResult leaves the tool_use without a tool_result (a pending
	// question or subtask).
	noResult bool
	uiSkip   bool
	path     string
	end      *ending
}

func rejected(format string, a ...any) callOutcome {
	return callOutcome{content: "Error: " + fmt.Sprintf(format, a...), isError: true, rejected: true, mistake: true}
}

func toolError(format string, a ...any) callOutcome {
	return callOutcome{content: "Error: " + fmt.Sprintf(format, a...), isError: true, mistake: true}
}

// execCall validates one call and, if it passes, runs it. Validation
// happens in full before anything touches the disk.
func (c *conv) execCall(ctx context.Context, call llms.ToolCall, turnFailed bool, resultsAt int) callOutcome {
	name, raw := call.FunctionCall.Name, call.FunctionCall.Arguments

	// Repetition: the same tool with the same arguments, N times in a row.
	key := name + "\x00" + canonicalArgs(raw)
	if key == c.lastKey {
		c.repeats++
	} else {
		c.lastKey, c.repeats = key, 1
	}
	if c.repeats >= c.a.opts.RepetitionLimit {
		out := rejected("%s was called with the same arguments %d times in a row; the conversation is stopped to break the loop", name, c.repeats)
		out.end = &ending{reason: ReasonRepetition, detail: fmt.Sprintf("%s called %d times in a row with the same arguments", name, c.repeats)}
		return out
	}

	spec, ok := specByName(name)
	if !ok {
		return rejected("unknown tool %q; the tools available in %s mode are: %s", name, c.mode.Slug, strings.Join(c.allowedNames(), ", "))
	}
	if !c.allowed[name] {
		if name == ToolNewTask {
			return rejected("new_task is not available: subtasks may be nested at most %d deep", c.a.opts.MaxSubtaskDepth)
		}
		return rejected("tool %q is not allowed in %s mode; the tools available in this mode are: %s", name, c.mode.Slug, strings.Join(c.allowedNames(), ", "))
	}
	m, err := parseArguments(raw)
	if err != nil {
		return rejected("malformed JSON in the arguments of %s (%v); nothing was executed. Send the call again with the arguments as one valid JSON object, for example {%s}", name, err, exampleArgs(spec))
	}
	a, err := checkParams(spec, m)
	if err != nil {
		return rejected("%s: %v", name, err)
	}

	var abs, rel string
	if spec.pathParam != "" {
		p := a.s(spec.pathParam)
		abs, rel, err = resolveInRoot(c.root, p)
		if err != nil && name == ToolReadFile && filepath.IsAbs(p) {
			if real, rerr := filepath.EvalSymlinks(p); rerr == nil {
				if _, ok := skillFor(c.skills, real); ok {
					abs, rel, err = real, p, nil
				}
			}
		}
		if err != nil {
			return rejected("%s: %v", name, err)
		}
		if spec.edit {
			if isGitPath(rel) {
				return rejected("%s: the .git folder may not be edited", name)
			}
			if c.fileRE != nil && !c.fileRE.MatchString(rel) {
				desc := c.mode.FileRegexDescription
				if desc == "" {
					desc = "files matching " + c.mode.FileRegex
				}
				return rejected("%s in %s mode may only edit files matching %s (%s); got %s", name, c.mode.Slug, c.mode.FileRegex, desc, rel)
			}
		}
	}

	report(ctx, Activity{Tool: name, Summary: callSummary(name, rel, a)})
	var out callOutcome
	switch name {
	case ToolReadFile:
		out = c.readFile(abs, rel, a)
	case ToolListFiles:
		out = c.listFiles(abs, rel, a.flag["recursive"])
	case ToolSearchFiles:
		out = c.searchFiles(abs, rel, a)
	case ToolWriteToFile:
		out = c.writeFile(abs, rel, a.s("content"))
	case ToolApplyDiff:
		out = c.applyDiffTool(abs, rel, a.s("diff"))
	case ToolExecuteCommand:
		if err := c.a.opts.CommandPolicy.Check(a.s("command")); err != nil {
			return rejected("execute_command: %v", err)
		}
		out = c.executeCommand(ctx, a.s("command"), a.num["timeout_seconds"])
	case ToolUpdateTodoList:
		c.rec.Meta.Todos = a.todos
		out = callOutcome{content: "Todo list updated:\n" + formatTodos(a.todos)}
	case ToolNewTask:
		mode := a.s("mode")
		if _, ok := c.a.modes[mode]; !ok {
			return rejected("new_task: unknown mode %q; modes: %s", mode, strings.Join(c.a.Modes(), ", "))
		}
		out = c.runChild(ctx, call.ID, mode, a.s("message"), resultsAt)
	case ToolUseMCPTool:
		out = c.useMCPTool(ctx, a)
	case ToolAccessMCPResource:
		out = c.accessMCPResource(ctx, a)
	case ToolAttemptCompletion:
		out = c.attemptCompletion(a.s("result"), turnFailed)
	case ToolAskFollowupQuestion:
		q := a.s("question")
		c.rec.Meta.PendingQuestion = &PendingQuestion{ToolUseID: call.ID, Question: q}
		c.rec.UI = append(c.rec.UI, UIMessage{TS: c.now(), Type: UIAsk, Ask: AskFollowup, Text: q})
		out = callOutcome{noResult: true, uiSkip: true, end: &ending{reason: ReasonQuestion, question: q, detail: q}}
	}
	if out.path == "" {
		out.path = rel
	}
	return out
}

func (c *conv) allowedNames() []string {
	var names []string
	for _, s := range toolSpecs {
		if c.allowed[s.name] {
			names = append(names, s.name)
		}
	}
	return names
}

func exampleArgs(s toolSpec) string {
	var parts []string
	for _, p := range s.params {
		if p.required {
			parts = append(parts, fmt.Sprintf("%q: …", p.name))
		}
	}
	return strings.Join(parts, ", ")
}

func (c *conv) readFile(abs, rel string, a args) callOutcome {
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return toolError("read_file: %s does not exist", rel)
		}
		return toolError("read_file: %v", err)
	}
	if st.IsDir() {
		return toolError("read_file: %s is a folder; use list_files", rel)
	}
	data, err := safefile.ReadFile(abs, maxFileBytes)
	if err != nil {
		return toolError("read_file: %s", fileErr(rel, err))
	}
	if isBinary(data) {
		return toolError("read_file: %s looks like a binary file (%d bytes)", rel, len(data))
	}
	creds, err := c.credentials()
	if err != nil {
		return toolError("read_file: %v", err)
	}
	lines := strings.Split(creds.Redact(string(data)), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	start, end := 1, total
	if v, ok := a.num["start_line"]; ok {
		start = v
	}
	if v, ok := a.num["end_line"]; ok {
		end = v
	}
	if total == 0 {
		return callOutcome{content: fmt.Sprintf("%s is empty.", rel)}
	}
	if start < 1 || start > total {
		return toolError("read_file: start_line %d is outside the file's lines 1-%d", start, total)
	}
	if end > total {
		end = total
	}
	if end < start {
		return toolError("read_file: end_line %d is before start_line %d", end, start)
	}
	note := ""
	if end-start+1 > c.a.opts.ReadLimit {
		end = start + c.a.opts.ReadLimit - 1
		note = fmt.Sprintf("\n[showing lines %d-%d of %d; read the rest with start_line and end_line]", start, end, total)
	}
	var b strings.Builder
	width := len(fmt.Sprint(end))
	for i := start; i <= end; i++ {
		fmt.Fprintf(&b, "%*d | %s\n", width, i, lines[i-1])
	}
	content := strings.TrimSuffix(b.String(), "\n") + note
	if len(content) > c.a.opts.OutputLimit {
		content = content[:c.a.opts.OutputLimit] + fmt.Sprintf("\n[output cut at %d bytes; read fewer lines at a time]", c.a.opts.OutputLimit)
	}
	return callOutcome{content: content}
}

func isBinary(data []byte) bool {
	n := min(len(data), 8000)
	return bytes.IndexByte(data[:n], 0) >= 0
}

const maxListed = 500

func (c *conv) listFiles(abs, rel string, recursive bool) callOutcome {
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return toolError("list_files: %s does not exist", rel)
		}
		return toolError("list_files: %v", err)
	}
	if !st.IsDir() {
		return toolError("list_files: %s is a file; use read_file", rel)
	}
	var entries []string
	truncated := false
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == abs {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		r, _ := filepath.Rel(c.root, p)
		r = filepath.ToSlash(r)
		if d.IsDir() {
			r += "/"
		} else if d.Type()&fs.ModeSymlink != 0 {
			r += "@"
		}
		if len(entries) >= maxListed {
			truncated = true
			return filepath.SkipAll
		}
		entries = append(entries, r)
		if d.IsDir() && !recursive {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return toolError("list_files: %v", err)
	}
	sort.Strings(entries)
	if len(entries) == 0 {
		return callOutcome{content: fmt.Sprintf("%s is empty.", rel)}
	}
	content := strings.Join(entries, "\n")
	if truncated {
		content += fmt.Sprintf("\n[listing cut at %d entries; list a subfolder]", maxListed)
	}
	return callOutcome{content: content}
}

const maxMatches = 200

func (c *conv) searchFiles(abs, rel string, a args) callOutcome {
	re, err := regexp.Compile(a.s("regex"))
	if err != nil {
		return toolError("search_files: bad regex: %v", err)
	}
	pattern := a.s("file_pattern")
	if pattern != "" {
		if _, err := path.Match(pattern, "x"); err != nil {
			return toolError("search_files: bad file_pattern %q: %v", pattern, err)
		}
	}
	st, err := os.Stat(abs)
	if err != nil {
		return toolError("search_files: %s does not exist", rel)
	}
	if !st.IsDir() {
		return toolError("search_files: %s is a file; give its folder", rel)
	}
	creds, err := c.credentials()
	if err != nil {
		return toolError("search_files: %v", err)
	}
	var hits []string
	truncated := false
	_ = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks and devices are not followed
		}
		relToRoot, _ := filepath.Rel(c.root, p)
		relToRoot = filepath.ToSlash(relToRoot)
		if pattern != "" {
			okBase, _ := path.Match(pattern, d.Name())
			okPath, _ := path.Match(pattern, relToRoot)
			if !okBase && !okPath {
				return nil
			}
		}
		data, err := safefile.ReadFile(p, maxFileBytes)
		if err != nil || isBinary(data) {
			return nil
		}
		sc := bufio.NewScanner(strings.NewReader(creds.Redact(string(data))))
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		line := 0
		for sc.Scan() {
			line++
			if re.MatchString(sc.Text()) {
				if len(hits) >= maxMatches {
					truncated = true
					return filepath.SkipAll
				}
				hits = append(hits, fmt.Sprintf("%s:%d: %s", relToRoot, line, shorten(strings.TrimSpace(sc.Text()), 300)))
			}
		}
		return nil
	})
	if len(hits) == 0 {
		return callOutcome{content: "No matches."}
	}
	content := fmt.Sprintf("%d matches:\n%s", len(hits), strings.Join(hits, "\n"))
	if truncated {
		content += fmt.Sprintf("\n[results cut at %d matches; narrow the regex or the folder]", maxMatches)
	}
	if len(content) > c.a.opts.OutputLimit {
		content = content[:c.a.opts.OutputLimit] + "\n[output cut]"
	}
	return callOutcome{content: content}
}

func (c *conv) writeFile(abs, rel, content string) callOutcome {
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return toolError("write_to_file: %s is a folder", rel)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return toolError("write_to_file: %v", err)
	}
	_, existed := os.Stat(abs)
	if err := safefile.WriteFile(abs, []byte(content), 0o644); err != nil {
		return toolError("write_to_file: %s", fileErr(rel, err))
	}
	c.fileChanged(rel)
	verb := "Created"
	if existed == nil {
		verb = "Wrote"
	}
	lines := strings.Count(content, "\n")
	if content != "" && !strings.HasSuffix(content, "\n") {
		lines++
	}
	return callOutcome{content: fmt.Sprintf("%s %s (%d lines, %d bytes).", verb, rel, lines, len(content))}
}

func (c *conv) applyDiffTool(abs, rel, diff string) callOutcome {
	data, err := safefile.ReadFile(abs, maxFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return toolError("apply_diff: %s does not exist; use write_to_file to create it", rel)
		}
		return toolError("apply_diff: %s", fileErr(rel, err))
	}
	updated, n, err := applyDiff(string(data), diff)
	if err != nil {
		return toolError("apply_diff on %s: %v; the file was not changed", rel, err)
	}
	st, _ := os.Stat(abs)
	perm := os.FileMode(0o644)
	if st != nil {
		perm = st.Mode().Perm()
	}
	if err := safefile.WriteFile(abs, []byte(updated), perm); err != nil {
		return toolError("apply_diff: %s", fileErr(rel, err))
	}
	c.fileChanged(rel)
	return callOutcome{content: fmt.Sprintf("Applied %d block(s) to %s.", n, rel)}
}

// maxFileBytes bounds a file the tools read whole: a larger one (a sparse
// file a command made, say) would be held in memory for nothing, since
// a reply carries far less.
const maxFileBytes = 16 << 20

// fileErr says why a file tool could not use rel, naming the path the
// model gave rather than the resolved one.
func fileErr(rel string, err error) string {
	var tl *safefile.TooLargeError
	switch {
	case errors.As(err, &tl):
		return fmt.Sprintf("%s is %d bytes, more than the %d the file tools read; use execute_command (head, sed -n, grep) for parts of it", rel, tl.Size, tl.Limit)
	case errors.Is(err, safefile.ErrNotRegular):
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Sprintf("%s %v", rel, pe.Err)
		}
	}
	return err.Error()
}

func (c *conv) fileChanged(rel string) {
	for _, f := range c.rec.Meta.FilesChanged {
		if f == rel {
			return
		}
	}
	c.rec.Meta.FilesChanged = append(c.rec.Meta.FilesChanged, rel)
	sort.Strings(c.rec.Meta.FilesChanged)
}

func (c *conv) executeCommand(ctx context.Context, command string, timeoutSeconds int) callOutcome {
	timeout := c.a.opts.CommandTimeout
	if timeoutSeconds > 0 {
		timeout = min(time.Duration(timeoutSeconds)*time.Second, c.a.opts.MaxCommandTimeout)
	}
	cf, err := c.confinement()
	if err != nil {
		return toolError("execute_command: %v", err)
	}
	res, err := runProcess(ctx, c.root, []string{"sh", "-c", command}, cf, timeout, c.a.opts.OutputLimit)
	if err != nil {
		if ctx.Err() != nil {
			return callOutcome{content: "Command interrupted: the conversation was cancelled.", isError: true, failed: true}
		}
		return toolError("execute_command: %v", err)
	}
	c.a.log.DebugContext(ctx, "command ran", c.logAttrs(slog.String("command", shorten(command, 200)),
		slog.Int("exit_code", res.ExitCode), slog.Duration("duration", res.Duration))...)
	output := res.Output
	if strings.TrimSpace(output) == "" {
		output = "(no output)"
	}
	if res.TimedOut {
		return callOutcome{content: fmt.Sprintf("Command timed out after %s and was killed.\nOutput:\n%s", timeout, output), failed: true}
	}
	return callOutcome{content: fmt.Sprintf("Exit code: %d\nOutput:\n%s", res.ExitCode, output), failed: res.ExitCode != 0}
}

func (c *conv) attemptCompletion(result string, turnFailed bool) callOutcome {
	if turnFailed {
		return callOutcome{isError: true, mistake: true, content: "Error: attempt_completion refused: a tool call failed earlier in this turn. Look at its result, fix the problem, and try again in a later turn."}
	}
	if open := openTodos(c.rec.Meta.Todos); len(open) > 0 && !c.a.opts.AllowOpenTodos {
		return callOutcome{isError: true, mistake: true, content: fmt.Sprintf(
			"Error: attempt_completion refused: %d todo(s) are still open:\n%s\nFinish them and mark them completed with update_todo_list, or remove the ones that no longer apply.",
			len(open), formatTodos(open))}
	}
	return callOutcome{content: "The result was accepted. The task is complete.",
		end: &ending{reason: ReasonCompleted, completion: result}}
}

// runChild starts a new_task subtask and waits for it.
func (c *conv) runChild(ctx context.Context, callID, mode, message string, resultsAt int) callOutcome {
	m := &c.rec.Meta
	id := childID(m.ID, len(m.ChildIDs)+1)
	m.ChildIDs = append(m.ChildIDs, id)
	m.PendingChild = &PendingChild{ToolUseID: callID, ChildID: id}
	m.Status = StatusAwaitingSubtask
	c.rec.UI = append(c.rec.UI, UIMessage{TS: c.now(), Type: UISay, Say: SayText, ChildID: id,
		Text: fmt.Sprintf("Started subtask %s in %s mode.", id, mode)})
	child := c.a.newRecord(id, message, mode, m.Worktree, m)
	// The parent is saved before the child exists, and the child before it
	// runs: a restart finds the link from either side.
	if err := c.save(ctx); err != nil {
		return callOutcome{noResult: true, end: &ending{reason: ReasonError, detail: err.Error(), err: err}}
	}
	cc, err := c.a.newConv(ctx, child, c.budget)
	if err != nil {
		return c.childOutcome(nil, err)
	}
	if err := cc.save(ctx); err != nil {
		return c.childOutcome(nil, err)
	}
	c.a.log.InfoContext(ctx, "subtask started", c.logAttrs(slog.String("child_id", id), slog.String("child_mode", mode))...)
	res, err := cc.loop(ctx)
	return c.childOutcome(res, err)
}

// resumeChild resumes the subtask a parent waits for (starting it again
// from the parent's new_task call if it was never saved).
func (c *conv) resumeChild(ctx context.Context, pc *PendingChild, ro *ResumeOpts, b *budget) (callOutcome, error) {
	childRO := &ResumeOpts{Worktree: ro.Worktree, Answer: ro.Answer}
	rec, err := c.a.store.Load(ctx, pc.ChildID)
	if errors.Is(err, ErrNotFound) {
		mode, message, ok := c.newTaskArgs(pc.ToolUseID)
		if !ok {
			return c.childOutcome(nil, fmt.Errorf("subtask %s: no record and no new_task call %s to restart it from", pc.ChildID, pc.ToolUseID)), nil
		}
		rec = c.a.newRecord(pc.ChildID, message, mode, c.rec.Meta.Worktree, &c.rec.Meta)
		cc, err := c.a.newConv(ctx, rec, b)
		if err != nil {
			return c.childOutcome(nil, err), err
		}
		if err := cc.save(ctx); err != nil {
			return c.childOutcome(nil, err), err
		}
		res, err := cc.loop(ctx)
		return c.childOutcome(res, err), err
	}
	if err != nil {
		return c.childOutcome(nil, err), err
	}
	res, err := c.a.resume(ctx, rec, childRO, b)
	return c.childOutcome(res, err), err
}

func (c *conv) newTaskArgs(toolUseID string) (mode, message string, ok bool) {
	for _, m := range c.rec.API {
		for _, b := range m.Content {
			if b.Type == BlockToolUse && b.ID == toolUseID && b.Input != nil {
				var in struct {
					Mode    string `json:"mode"`
					Message string `json:"message"`
				}
				if err := json.Unmarshal(b.Input, &in); err == nil && in.Mode != "" {
					return in.Mode, in.Message, true
				}
			}
		}
	}
	return "", "", false
}

// childOutcome turns a subtask's ending into its parent's tool result, or
// into the parent's own ending when the parent cannot continue (a question
// to escalate, a cancellation, an error).
func (c *conv) childOutcome(res *Result, err error) callOutcome {
	m := &c.rec.Meta
	pc := m.PendingChild
	id := ""
	if pc != nil {
		id = pc.ChildID
	}
	if res == nil {
		if err == nil {
			err = errors.New("subtask ended without a result")
		}
		return callOutcome{noResult: true, uiSkip: true, end: &ending{reason: ReasonError, detail: fmt.Sprintf("subtask %s: %v", id, err), err: err}}
	}
	switch res.Reason {
	case ReasonQuestion, ReasonCancelled, ReasonError:
		// The parent keeps waiting; a resume resumes the child first.
		return callOutcome{noResult: true, uiSkip: true, end: &ending{reason: res.Reason, question: res.Question,
			detail: fmt.Sprintf("subtask %s: %s", id, firstNonEmpty(res.Detail, res.Question)), err: err}}
	}
	m.PendingChild = nil
	m.Status = StatusActive
	m.SubtaskUsage.Add(res.Usage)
	if res.Reason == ReasonCompleted {
		c.rec.UI = append(c.rec.UI, UIMessage{TS: c.now(), Type: UISay, Say: SaySubtaskResult, ChildID: id, Text: res.Completion})
		return callOutcome{content: fmt.Sprintf("Subtask %s (%s mode) completed. Its result:\n%s", id, res.Mode, res.Completion)}
	}
	text := fmt.Sprintf("Subtask %s (%s mode) ended without completing (%s): %s", id, res.Mode, res.Reason, res.Detail)
	c.rec.UI = append(c.rec.UI, UIMessage{TS: c.now(), Type: UISay, Say: SaySubtaskResult, ChildID: id, Text: text})
	return callOutcome{content: "Error: " + text, isError: true, failed: true}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// confinement is how the commands of this conversation's worktree run.
func (c *conv) confinement() (proc.Confinement, error) {
	confine := c.a.opts.ConfineFunc
	if confine == nil {
		confine = defaultConfinement
	}
	return confine(c.root)
}

// credentials returns what is hidden from the files this conversation
// reads: the credentials among the values the worktree's sandbox keeps
// from commands, and the provider keys (see proc.Redactor.Credentials).
func (c *conv) credentials() (*proc.Redactor, error) {
	if c.creds == nil {
		cf, err := c.confinement()
		if err != nil {
			return nil, fmt.Errorf("what to redact is unknown: %w", err)
		}
		c.creds = cf.Redactor.Credentials()
	}
	return c.creds, nil
}

// redact hides credentials in a tool's result before the model, the
// history or the store sees it, whatever tool produced it (an MCP
// server's answer, say). read_file and search_files hide them in what
// they read, before they number and cut it; a command's output has every
// secret value hidden as it is read.
func (c *conv) redact(out callOutcome) callOutcome {
	creds, err := c.credentials()
	if err != nil {
		// What the call did stands (its ending too); only its result
		// is withheld.
		out.content, out.isError = "Error: the result was withheld: "+err.Error(), true
		return out
	}
	out.content = creds.Redact(out.content)
	return out
}
