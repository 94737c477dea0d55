package llmtest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/taskloom/taskloom/llm/llmtest"
)

func ExampleStart() {
	// In a test, llmtest.NewServer(t, ...) also closes the server at the end.
	srv := llmtest.Start(llmtest.OpenAIChat("hello"))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"content":"hello"`))
	req := srv.Requests()[0]
	fmt.Println(req.Path, req.JSON()["model"])
	// Output:
	// 200 true
	// /v1/chat/completions m
}

func ExampleAnthropicStream() {
	r := llmtest.AnthropicStream(0, llmtest.AnthropicToolUse("toolu_1", "read_file", `{"path":"a.go"}`))
	for _, line := range strings.Split(r.Body, "\n") {
		if strings.HasPrefix(line, "event: ") {
			fmt.Println(strings.TrimPrefix(line, "event: "))
		}
	}
	// Output:
	// message_start
	// content_block_start
	// content_block_delta
	// content_block_stop
	// message_delta
	// message_stop
}
