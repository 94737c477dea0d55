package llm_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/llm"
)

func ExampleScripted() {
	script, err := llm.ParseScript([]byte(`{"conversations": [
	  {"match": "Task: T1\\b",
	   "replies": [
	     {"content": "I'll write the file.",
	      "tool_calls": [{"name": "write_to_file", "arguments": {"path": "a.go", "content": "package a\n"}}]},
	     {"tool_calls": [{"name": "attempt_completion", "arguments": "{\"result\": \"done\"}"}]}
	   ]}
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	model := llm.NewScripted(script)
	ctx := context.Background()

	msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "Task: T1 — write a.go\nAttempt: 1 of 3")}
	for range 2 {
		resp, err := model.GenerateContent(ctx, msgs)
		if err != nil {
			fmt.Println(err)
			return
		}
		c := resp.Choices[0]
		fmt.Printf("content=%q stop=%s\n", c.Content, c.StopReason)
		ai := llms.MessageContent{Role: llms.ChatMessageTypeAI}
		for _, tc := range c.ToolCalls {
			fmt.Printf("  %s %s %s\n", tc.ID, tc.FunctionCall.Name, tc.FunctionCall.Arguments)
			ai.Parts = append(ai.Parts, tc)
		}
		msgs = append(msgs, ai)
	}
	_, err = model.GenerateContent(ctx, msgs)
	fmt.Println(err)
	// Output:
	// content="I'll write the file." stop=tool_calls
	//   call_0_0_0 write_to_file {"path":"a.go","content":"package a\n"}
	// content="" stop=tool_calls
	//   call_0_1_0 attempt_completion {"result": "done"}
	// scripted model: conversation ran past its last reply: conversation 0 (match "Task: T1\\b") has 2 replies, request needs reply index 2
}

func ExampleParseSpec() {
	for _, s := range []string{"anthropic:claude-sonnet-4-5", "openai-compatible:llama3.1:8b@http://localhost:11434/v1", "scripted:testdata/session.json"} {
		spec, err := llm.ParseSpec(s)
		fmt.Printf("provider=%s model=%s base_url=%s path=%s err=%v\n", spec.Provider, spec.Model, spec.BaseURL, spec.Path, err)
	}
	// Output:
	// provider=anthropic model=claude-sonnet-4-5 base_url= path= err=<nil>
	// provider=openai-compatible model=llama3.1:8b base_url=http://localhost:11434/v1 path= err=<nil>
	// provider=scripted model= base_url= path=testdata/session.json err=<nil>
}

func ExampleValidateToolCall() {
	calls := []llms.ToolCall{
		{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "read_file", Arguments: `{"path": "a.go"}`}},
		{ID: "call_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "write_to_file", Arguments: `{"path": "a.go", `}},
	}
	for _, tc := range calls {
		fmt.Println(llm.ValidateToolCall(tc))
	}
	// Output:
	// <nil>
	// tool call write_to_file (id call_2): arguments are not valid JSON (unexpected end of input after 17 bytes; the JSON is truncated): "{\"path\": \"a.go\", "; the call was not executed, send it again with its arguments as one complete JSON object
}

func ExampleUsageOf() {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		GenerationInfo: map[string]any{"InputTokens": 12000, "OutputTokens": 800},
	}}}
	u := llm.UsageOf(resp, "anthropic:claude-sonnet-4-5")
	fmt.Printf("in=%d out=%d cost=$%.4f\n", u.InputTokens, u.OutputTokens, u.CostUSD)
	// Output:
	// in=12000 out=800 cost=$0.0480
}
