package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
)

// exampleScript is the scripted session of the package doc's example.
const exampleScript = `{"conversations": [
  {"match": "Task: T1\\b[\\s\\S]*Attempt: 1 of",
   "replies": [
     {"content": "I'll write the file.",
      "tool_calls": [{"name": "write_to_file", "arguments": {"path": "greet.go", "content": "package greet\n\nfunc Hello() string { return \"hello\" }\n"}}]},
     {"tool_calls": [{"name": "attempt_completion", "arguments": "{\"result\": \"Added greet.Hello.\"}"}]}
   ]}
]}`

// One conversation with the scripted model, and the two histories it
// leaves: what a person reads, and what the model saw.
func Example() {
	ctx := context.Background()
	script, err := llm.ParseScript([]byte(exampleScript))
	if err != nil {
		panic(err)
	}
	worktree, err := os.MkdirTemp("", "taskloom-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(worktree)

	store := agent.NewMemoryStore()
	a, err := agent.New(llm.NewScripted(script), store, &agent.Opts{
		Skills:  &agent.SkillsOpts{NoGlobal: true},
		NowFunc: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	res, err := a.Run(ctx, agent.Request{
		ID:       "run-1/T1/1",
		Task:     "Task: T1 — Add a greeting\nAttempt: 1 of 3\n\nCreate greet.go with Hello.",
		Worktree: worktree,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %s %v, %d turns, %d model calls\n", res.Reason, res.Completion, res.FilesChanged, res.Turns, res.Usage.Calls)

	rec, err := store.Load(ctx, "run-1/T1/1")
	if err != nil {
		panic(err)
	}
	fmt.Println("ui_messages.json:")
	for _, m := range rec.UI {
		if m.Say == agent.SayAPIRequest {
			continue // one per model call, with its usage
		}
		line := m.Say
		if m.Tool != nil {
			line += fmt.Sprintf(" %s %s → %q", m.Tool.Name, m.Tool.Path, m.Tool.Result)
		} else {
			line += fmt.Sprintf(" %q", firstLine(m.Text))
		}
		fmt.Println(" ", line)
	}
	fmt.Println("api_conversation_history.json:")
	for _, m := range rec.API {
		var blocks []string
		for _, b := range m.Content {
			switch b.Type {
			case agent.BlockText:
				blocks = append(blocks, fmt.Sprintf("text %q", firstLine(b.Text)))
			case agent.BlockToolUse:
				blocks = append(blocks, fmt.Sprintf("tool_use %s %s", b.ID, b.Name))
			case agent.BlockToolResult:
				blocks = append(blocks, fmt.Sprintf("tool_result %s %q", b.ToolUseID, b.Content))
			}
		}
		fmt.Printf("  %s: %s\n", m.Role, strings.Join(blocks, ", "))
	}
	// Output:
	// completed: Added greet.Hello. [greet.go], 2 turns, 2 model calls
	// ui_messages.json:
	//   task "Task: T1 — Add a greeting"
	//   text "I'll write the file."
	//   tool write_to_file greet.go → "Created greet.go (3 lines, 54 bytes)."
	//   tool attempt_completion  → "The result was accepted. The task is complete."
	//   completion_result "Added greet.Hello."
	// api_conversation_history.json:
	//   user: text "Task: T1 — Add a greeting"
	//   assistant: text "I'll write the file.", tool_use call_0_0_0 write_to_file
	//   user: tool_result call_0_0_0 "Created greet.go (3 lines, 54 bytes)."
	//   assistant: tool_use call_0_1_0 attempt_completion
	//   user: tool_result call_0_1_0 "The result was accepted. The task is complete."
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// The command worker runs an external agent CLI in the worktree and reads
// its claude -p JSON output.
func ExampleCommandWorker() {
	worktree, err := os.MkdirTemp("", "taskloom-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(worktree)
	w, err := agent.NewCommandWorker(agent.CommandWorkerOpts{Argv: []string{"sh", "-c",
		`echo "working on $0" >&2; echo '{"type":"result","is_error":false,"result":"done","session_id":"s-1","total_cost_usd":0.25}'`,
		"{task_id}"}})
	if err != nil {
		panic(err)
	}
	out, err := w.Implement(context.Background(), agent.Job{
		RunID: "run-1", Task: planner.Task{ID: "T1", Title: "Add a greeting"}, Attempt: 1, MaxAttempts: 3, Worktree: worktree,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Status, out.Summary, out.SessionID, out.Usage.CostUSD, *out.ExitCode)
	fmt.Print(out.Output[strings.Index(out.Output, "working"):][:len("working on T1")])
	// Output:
	// done done s-1 0.25 0
	// working on T1
}
