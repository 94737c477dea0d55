// Package agent is taskloom's built-in coding agent, after Roo-Code's task
// loop, and the workers the pipeline runs task attempts with.
//
// # The loop
//
// [Agent.Run] starts a conversation: a system prompt (the mode's role, the
// tools, the rules, the skills, the task context) and the task as the first
// user message. Each turn is one model call with native tools
// ([llms.WithTools]); the reply's tool calls are validated and run in order,
// their results appended as tool_result blocks, and the conversation is
// persisted to a [HistoryStore] before the next turn. The loop ends, and
// [Result.Reason] says why, when:
//
//   - attempt_completion is accepted ([ReasonCompleted]);
//   - ask_followup_question is called: the run is unattended, so the
//     question ends the loop for the pipeline to escalate ([ReasonQuestion]);
//   - too many calls in a row were rejected or failed ([ReasonMistakeLimit]);
//     a reply without any tool call counts as one;
//   - the same tool was called with the same arguments N times in a row
//     ([ReasonRepetition]);
//   - the turn limit, or the token or cost budget of the conversation tree,
//     is reached ([ReasonMaxTurns], [ReasonBudget]);
//   - the context ends ([ReasonCancelled]) or the model or store fails
//     ([ReasonError]); only these two return an error with the Result.
//
// Completion is never detected from text: only an attempt_completion call
// completes, and it is refused (with the reason, as an error tool_result)
// while a tool failed earlier in the same turn, or while todos from
// update_todo_list are open (unless [Opts.AllowOpenTodos]).
//
// # Tools and validation
//
// The tools are those of the product contract: read_file, list_files, search_files,
// write_to_file, apply_diff (Roo's SEARCH/REPLACE blocks, all or nothing),
// execute_command (sh -c in the worktree, with a timeout that kills the
// process group, and output cut to its head and tail), update_todo_list,
// new_task, attempt_completion and ask_followup_question. Before a call
// runs, it must pass, in order: the repetition detector; the tool exists; it
// is in the mode's tool groups; its arguments are one JSON object (malformed
// JSON becomes an error tool_result the model reads, and counts as one
// mistake); required parameters are present with the right types and no
// unknown ones; every path resolves inside the worktree (absolute paths,
// "..", and symlinks or dangling symlinks leading out are rejected; the
// deepest existing ancestor is resolved with [filepath.EvalSymlinks]); .git
// is not edited; the mode's fileRegex allows the edited path; and commands
// pass the [CommandPolicy]. A rejected call touches nothing. The one
// exception to worktree confinement is read_file on a discovered skill's
// files, which the system prompt lists by absolute path.
//
// # Modes and skills
//
// The built-in modes are code, architect (edits Markdown only), ask, debug
// and orchestrator (no file tools; delegates with new_task), with the tool
// groups read, edit and command; new_task, update_todo_list,
// attempt_completion and ask_followup_question are always available. Custom
// modes ([Opts.CustomModes]) bring their own role, groups and fileRegex. A
// conversation's mode is fixed when it starts.
//
// Skills are SKILL.md files with a front matter name (kebab-case, equal to
// the folder's) and description (1–1024 characters), found by
// [DiscoverSkills] in ~/.taskloom/skills, skills-<mode> beside it, and the
// worktree's .claude, .agents and .taskloom folders. Project skills override
// global ones and mode-specific ones generic ones; invalid ones are logged
// and skipped. The system prompt lists them and tells the model to load a
// matching one with read_file before it acts.
//
// # Histories
//
// Every conversation keeps two histories and its metadata ([Record]): UI
// messages (what a person reads: task, text, tool, error,
// completion_result, condense_context, subtask_result and api_req entries
// with timestamps), API messages (what the model sees, in Anthropic's shape,
// with tool_results in user messages) and [Metadata] (mode, status, reason,
// usage, todos, files changed, parent and child IDs, the pending subtask or
// question). The whole record is saved after every turn. [FileStore] keeps
// Roo-Code's layout (one folder per conversation with ui_messages.json,
// api_conversation_history.json and task_metadata.json, each written to a
// temporary file and renamed); [MemoryStore] is for tests; [Export] writes a
// conversation and its subtasks (in subtask-<n> folders) in that layout.
//
// [Agent.Resume] continues a stored conversation. Any tool_use without a
// tool_result, anywhere in the history, first gets an "interrupted" one, so
// that providers accept the history. A pending question gets
// [ResumeOpts.Answer]. A reviewer's [ResumeOpts.Note] becomes a user message.
//
// # Subtasks
//
// new_task starts a child conversation (ID "<parent>.<n>") with its own mode
// and histories; the parent waits. The parent is saved with the pending
// child's ID before the child starts, so a restart finds the link: resuming
// the parent resumes the child first (or restarts it from the new_task call
// if it was never saved), and the child's attempt_completion result becomes
// the parent's tool_result. A child's question escalates through its parent.
//
// # Context
//
// Each request's tokens are estimated (four bytes a token, tools included).
// Above [Opts.CondenseThreshold] of [Opts.ContextWindow] (default 80% of
// [DefaultContextWindow], 200k tokens), the older turns are condensed into a summary the model writes, in a
// separate call whose first user message is [CondenseRequest]. The task
// message and the last [Opts.KeepRecentTurns] turns stay verbatim, and the
// kept part always starts at an assistant message, so a tool_use and its
// tool_result are never separated. Nothing is deleted: the condensed
// messages are marked with condense_parent, the summary is stored as a
// message with is_summary (with the files changed and the todo list added
// by taskloom, so they cannot be lost in summarizing), and a
// condense_context UI entry records it. The model then sees the summary
// after the task text in the first user message; with the scripted model,
// route those requests by matching "condensation 1;" in a conversation
// listed before the task's.
//
// # Workers
//
// The pipeline calls a [Worker] for each task attempt with a [Job]. The
// prompt ([BuildPrompt]) starts with the lines "Task: <ID> — <title>" and
// "Attempt: <n> of <max>". [AgentWorker] runs the loop above in conversation
// [ConversationID](run, task, attempt, iteration) and is idempotent per
// conversation (an interrupted one is resumed, a finished one returned).
// [CommandWorker] runs an external agent CLI from an argv template with
// {prompt}, {task_id} and {worktree}, in the worktree, with a timeout, and
// reads `claude -p --output-format json` output for the result, cost and
// session. [Ralph] reruns a worker with fresh context: <promise>DONE</promise>
// (alone on a line) ends it only if [RalphOpts.TestsPassFunc] passes,
// <promise>BLOCKED</promise> stops it as blocked, and so do
// [RalphOpts.StagnationLimit] iterations in a row that leave
// [RalphOpts.DiffFunc] unchanged; [RalphOpts.MaxIterations] bounds it.
// [Accounting] sums usage per conversation, task and run.
//
// # Example
//
// This scripted session writes a file and completes:
//
//	{"conversations": [
//	  {"match": "Task: T1\\b[\\s\\S]*Attempt: 1 of",
//	   "replies": [
//	     {"content": "I'll write the file.",
//	      "tool_calls": [{"name": "write_to_file", "arguments": {"path": "greet.go",
//	        "content": "package greet\n\nfunc Hello() string { return \"hello\" }\n"}}]},
//	     {"tool_calls": [{"name": "attempt_completion", "arguments": "{\"result\": \"Added greet.Hello.\"}"}]}
//	   ]}
//	]}
//
// Run with it:
//
//	script, _ := llm.LoadScript("session.json")
//	a, _ := agent.New(llm.NewScripted(script), agent.NewFileStore(".taskloom/conversations"), nil)
//	res, err := a.Run(ctx, agent.Request{
//		ID:       "run-1/T1/1",
//		Task:     "Task: T1 — Add a greeting\nAttempt: 1 of 3\n\nCreate greet.go with Hello.",
//		Worktree: worktree,
//	})
//	// res.Reason == agent.ReasonCompleted, res.Completion == "Added greet.Hello."
//
// It leaves these histories. ui_messages.json:
//
//	[
//	  {"ts": 1735787046000, "type": "say", "say": "task",
//	   "text": "Task: T1 — Add a greeting\nAttempt: 1 of 3\n\nCreate greet.go with Hello."},
//	  {"ts": 1735787048000, "type": "say", "say": "api_req", "text": "turn 1: 2 messages, ~2237 tokens",
//	   "tokens": {"calls": 1, "input_tokens": 1027, "output_tokens": 32, "cost_usd": 0}},
//	  {"ts": 1735787050000, "type": "say", "say": "text", "text": "I'll write the file."},
//	  {"ts": 1735787052000, "type": "say", "say": "tool",
//	   "tool": {"id": "call_0_0_0", "name": "write_to_file",
//	            "arguments": "{\"path\":\"greet.go\",\"content\":\"package greet\\n\\nfunc Hello() string { return \\\"hello\\\" }\\n\"}",
//	            "path": "greet.go", "result": "Created greet.go (3 lines, 54 bytes)."}},
//	  {"ts": 1735787054000, "type": "say", "say": "api_req", "text": "turn 2: 4 messages, ~2287 tokens",
//	   "tokens": {"calls": 1, "input_tokens": 1077, "output_tokens": 13, "cost_usd": 0}},
//	  {"ts": 1735787057000, "type": "say", "say": "tool",
//	   "tool": {"id": "call_0_1_0", "name": "attempt_completion",
//	            "arguments": "{\"result\": \"Added greet.Hello.\"}",
//	            "result": "The result was accepted. The task is complete."}},
//	  {"ts": 1735787059000, "type": "say", "say": "completion_result", "text": "Added greet.Hello."}
//	]
//
// api_conversation_history.json:
//
//	[
//	  {"role": "user", "ts": 1735787046000, "content": [
//	    {"type": "text", "text": "Task: T1 — Add a greeting\nAttempt: 1 of 3\n\nCreate greet.go with Hello."}]},
//	  {"role": "assistant", "ts": 1735787049000, "content": [
//	    {"type": "text", "text": "I'll write the file."},
//	    {"type": "tool_use", "id": "call_0_0_0", "name": "write_to_file",
//	     "input": {"path": "greet.go", "content": "package greet\n\nfunc Hello() string { return \"hello\" }\n"}}]},
//	  {"role": "user", "ts": 1735787051000, "content": [
//	    {"type": "tool_result", "tool_use_id": "call_0_0_0", "content": "Created greet.go (3 lines, 54 bytes)."}]},
//	  {"role": "assistant", "ts": 1735787055000, "content": [
//	    {"type": "tool_use", "id": "call_0_1_0", "name": "attempt_completion",
//	     "input": {"result": "Added greet.Hello."}}]},
//	  {"role": "user", "ts": 1735787056000, "content": [
//	    {"type": "tool_result", "tool_use_id": "call_0_1_0",
//	     "content": "The result was accepted. The task is complete."}]}
//	]
//
// and task_metadata.json records {"id": "run-1/T1/1", "mode": "code",
// "status": "completed", "reason": "completed", "turns": 2, "usage":
// {"calls": 2, "input_tokens": 2104, "output_tokens": 45, ...},
// "files_changed": ["greet.go"], "completion": "Added greet.Hello.", ...}.
// A malformed call would appear in the API history with raw_input instead
// of input, followed by an is_error tool_result saying so; the package's
// Example prints the same conversation.
package agent
