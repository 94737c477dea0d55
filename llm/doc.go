// Package llm builds the language models taskloom talks to: it parses model
// specs, constructs langchaingo clients for real providers, plays scripted
// sessions for offline runs and tests, and guards against known gaps of
// langchaingo v0.1.14.
//
// # Model specs
//
// A spec is PROVIDER:REST (SPEC §3):
//
//	anthropic:MODEL                   Anthropic messages API, key from ANTHROPIC_API_KEY
//	openai:MODEL                      OpenAI chat completions, key from OPENAI_API_KEY
//	openai-compatible:MODEL@BASE_URL  any chat-completions server (Ollama, vLLM, LM Studio);
//	                                  OPENAI_API_KEY is used if set, else a placeholder
//	scripted:PATH                     the scripted model below, playing the file at PATH
//
// ParseSpec splits a spec; New builds the model. Bad specs are errors that
// name the spec and the accepted forms. "ollama:..." is refused on purpose:
// langchaingo's ollama client drops tool definitions, so use
// openai-compatible:MODEL@http://localhost:11434/v1 instead.
//
// # The scripted model
//
// Scripted (SPEC §6) is a real llms.Model that plays a JSON script. The file
// format:
//
//	{"conversations": [
//	  {"match": "Task: T1\\b[\\s\\S]*Attempt: 1 of",
//	   "replies": [
//	     {"content": "I'll write the file.",
//	      "tool_calls": [{"name": "write_to_file",
//	                      "arguments": {"path": "a.go", "content": "package a\n"}}]},
//	     {"tool_calls": [{"name": "attempt_completion",
//	                      "arguments": "{\"result\": \"done\"}"}],
//	      "delay_ms": 50}
//	   ]}
//	]}
//
// Keys (unknown keys are errors):
//
//   - conversations (required, at least one): tried in order.
//   - match (required, non-empty): an RE2 regex (Go regexp syntax) matched
//     against the text of the request's first user (human) message, its text
//     parts joined with "\n". Use (?s) or [\s\S] to span lines. The first
//     conversation that matches is played.
//   - replies (required, at least one): reply i answers a request that
//     already contains i assistant (AI) messages, so a conversation replays
//     the same way however many workers share the model.
//   - content: the reply text. Streamed in one chunk through
//     llms.WithStreamingFunc when the caller passes one.
//   - tool_calls: each has a name (required) and arguments. An object is
//     re-marshalled compactly into the call's argument string; a string is
//     passed through verbatim, so "{\"result\": " is a malformed call on
//     purpose. Absent arguments become "{}". A reply needs content, tool
//     calls or both.
//   - delay_ms: simulated latency before the reply; a cancelled context
//     ends the wait with the context's error.
//
// Each response has one choice. Its ToolCalls carry IDs
// "call_<conversation>_<reply>_<i>" (all zero-based) and type "function";
// FuncCall is the first of them. StopReason is "tool_calls" when there are
// tool calls and "stop" otherwise. GenerationInfo holds estimated
// "PromptTokens", "CompletionTokens" and "TotalTokens" (one token per four
// bytes, plus four per message), the keys langchaingo's openai client uses.
//
// A request no conversation matches fails with ErrNoMatch and quotes the
// first 80 characters of the first user message; a request past the last
// reply fails with ErrScriptExhausted and names the conversation, its regex
// and the reply index. ParseScript validates a script up front (regexes
// compile, replies are not empty, arguments are objects or strings, delays
// are not negative) and names the offending conversation by index.
package llm
