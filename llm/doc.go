// Package llm builds the language models taskloom talks to: it parses model
// specs, constructs langchaingo clients for real providers, plays scripted
// sessions for offline runs and tests, and guards against known gaps of
// langchaingo v0.1.14.
//
// # Model specs
//
// A spec is PROVIDER:REST:
//
//	anthropic:MODEL                   Anthropic messages API, key from ANTHROPIC_API_KEY
//	openai:MODEL                      OpenAI chat completions, key from OPENAI_API_KEY
//	openai-compatible:MODEL@BASE_URL  any chat-completions server (Ollama, vLLM, LM Studio);
//	                                  a key only from the variable Opts.APIKeyEnv names
//	scripted:PATH                     the scripted model below, playing the file at PATH
//
// ParseSpec splits a spec; New builds the model. Bad specs are errors that
// name the spec and the accepted forms. "ollama:..." is refused on purpose:
// langchaingo's ollama client drops tool definitions, so use
// openai-compatible:MODEL@http://localhost:11434/v1 instead.
//
// # The scripted model
//
// Scripted is a real llms.Model that plays a JSON script. The file
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
//
// # Provider models and keys
//
// New reads keys through Opts.GetenvFunc (default os.Getenv). A missing
// ANTHROPIC_API_KEY or OPENAI_API_KEY is an error (ErrMissingKey) naming the
// variable. An openai-compatible server gets a key only from the variable
// Opts.APIKeyEnv (llm.api_key_env) names, and none when it is empty:
// OPENAI_API_KEY is OpenAI's. OPENAI_ORGANIZATION is passed on when set.
// ANTHROPIC_BASE_URL is the API root (requests go to its /v1/messages) and
// OPENAI_BASE_URL the OpenAI base (…/v1); Opts.BaseURL overrides both
// (tests point it at an llmtest server). A key is never sent over plain
// http to a host other than loopback: New refuses such a base URL and the
// transport such a request (ErrInsecureKey).
//
// Errors from provider models pass through a Redactor: the key values New
// read, and anything shaped like an API key (sk-..., sk-ant-..., "Bearer
// ..."), become [REDACTED]. Redacted errors still unwrap to the original, so
// errors.Is works, and printing an unwrapped error bypasses the redaction.
// Redact does the same for any text with the keys of the current
// environment.
//
// # Retries, limits and timeouts (our transport)
//
// langchaingo v0.1.14 has no retries, no timeouts and no rate limiting,
// and its clients keep little of a failure. Those are filled in by the
// http.Client New gives the langchaingo clients, whose transport
// (NewTransportWith) does, for every request:
//
//   - Retries in place: 429, 529, other 5xx and 408, resets and other
//     connection failures, and tries cut by Opts.RequestTimeout are sent
//     again, the same bytes each time, up to Opts.MaxRetries (default 8).
//     The wait is what retry-after-ms, retry-after (seconds or a date) or,
//     for a 429, the providers' rate-limit reset headers ask for (capped
//     at 5 minutes), else full-jitter exponential backoff (uniform in
//     [0, min(60s, 1s·2^retry))). Each wait is told to Opts.WaitFunc.
//     What fails for good is a *ProviderError with the provider's message
//     (read from error bodies in the common shapes: {"error": {"message"}},
//     {"error": "text"}, vLLM's {"object": "error", "message"}, FastAPI's
//     {"detail"}, plain text), redacted; one whose retries ran out wraps
//     ErrRetriesExhausted. The guarded model returns it in place of
//     langchaingo's error.
//   - One Limiter per model (so per run: the CLI builds one model a run),
//     shared by its workers: Opts.RequestsPerMinute spaces requests evenly,
//     and a 429's wait, or a reply saying no requests remain, pauses every
//     request until then.
//   - Opts.RequestTimeout (default 5m) bounds each try: the headers and
//     the whole body, or for a stream each stretch without data. A stream
//     that stalls after data reached the caller cannot be retried in place
//     and fails with a *ProviderError (kind timeout).
//   - Anthropic requests get cache_control breakpoints unless
//     Opts.NoPromptCache: the tools, the system prompt, the first user
//     message (the task) and the newest message, Anthropic's maximum of
//     four, so each turn reads the conversation so far from the cache.
//     Failed tool results marked with MarkToolError get is_error: true.
//   - OpenAI-compatible replies are read leniently: tool arguments sent as
//     a JSON object become a string; a reply without usage gets its tokens
//     counted locally (EstimatePromptTokens, EstimateReplyTokens) and
//     marked InfoUsageEstimated.
//
// Calls that set no output limit ask for Opts.MaxTokens (default 16000;
// Anthropic's client would ask for 2,048). A reply cut by the limit keeps
// its stop reason (IsMaxTokens: "max_tokens", "length"); its tool calls are
// incomplete and callers must not run them.
//
// # Guards for langchaingo v0.1.14
//
// New returns provider models as *Guarded, which also wraps any model you
// pass to Guard, and installs NewTransport in their HTTP client. Each gap
// below is pinned by a test on the raw client (gaps_raw_test.go) and a test
// of the guard (gaps_guard_test.go), both against a local server speaking
// the provider's wire format.
//
//  1. Tool-call deltas reach the text callback (OpenAI streaming passes the
//     JSON of every tool-call delta to the streaming func). Guard: when a
//     request carries tools, an OpenAI or openai-compatible model is called
//     without streaming and the reply text is handed to the streaming func
//     in one chunk afterwards. The cost: no live text while tools are on.
//     Anthropic's client streams only text deltas, so it keeps streaming.
//  2. Malformed arguments come back verbatim, without an error. This is
//     not hidden: ValidateToolCall (and ToolArguments) parse the arguments
//     and return a *ToolCallError whose message is meant to be sent back
//     to the model as the tool result. Callers must validate every call.
//  3. Interleaved parallel tool-call deltas are appended to the wrong call,
//     silently. Guard: avoided by the non-streamed request of 1;
//     ValidateToolCall also flags corrupted arguments if a caller streams
//     on its own.
//  4. An SSE line over 64 KiB fails the call (bufio.Scanner's limit).
//     Guard: the transport reads lines of any length (up to 64 MiB) and
//     splits a data line over 32 KiB into several events, cutting text,
//     reasoning and tool-argument deltas into pieces of at most 8 KiB;
//     long non-data lines (comments, ids), which langchaingo ignores, are
//     dropped. A long event it does not understand is passed on unchanged
//     and still fails. Non-streamed responses never had the limit, so a
//     >64 KiB tool argument works both ways.
//  5. The Anthropic client fails the whole call when a tool_use input is
//     not a JSON object (streamed: the concatenated input_json_delta does
//     not parse; not streamed: input is not an object). Guard: the
//     transport holds each tool_use block's deltas until the block stops
//     and, when the whole input is not a JSON object, sends it as
//     {"__taskloom_unparsed_arguments__": "<text>"}; it does the same to a
//     non-object input in a non-streamed response. *Guarded unwraps it, so
//     the caller gets a tool call whose Arguments is the original malformed
//     text, which ValidateToolCall rejects. Tool-input deltas therefore
//     arrive at block end instead of as they stream (langchaingo never
//     streamed them to callers anyway).
//  6. The Ollama client drops tool definitions. ParseSpec and New refuse
//     "ollama:" and point to openai-compatible:MODEL@http://localhost:11434/v1.
//
// Found while building these, and also guarded for Anthropic:
//
//   - The client sends only the first part of an assistant or tool
//     message, so an assistant turn with text and tool calls, or several
//     tool results in one message, lose parts. *Guarded sends one message
//     per part and the transport merges consecutive messages of one role
//     back into a single turn in the request body.
//   - Past tool calls whose arguments are not a JSON object fail the next
//     request; *Guarded wraps them as in 5 so the history can be sent.
//   - Empty messages would panic inside the client; they are dropped.
//   - Each content block comes back as its own choice. *Guarded merges them
//     into one choice: text concatenated, all tool calls in order (with
//     Type "function"), thinking in ReasoningContent, token counts kept.
//     StopReason is the provider's ("tool_use", "end_turn").
//
// For every provider, tool calls get Type "function" when the provider left
// it empty, FuncCall points at the first tool call, and an error that
// happens after the context ended wraps the context's error (the openai
// client replaces it with "request cancelled").
//
// # Usage and cost
//
// UsageOf reads token counts from a response: input excluding the cache,
// output, cache reads and cache writes (Anthropic's counts as they are,
// OpenAI's cached prompt tokens taken out of its prompt tokens), and
// whether they were estimated. It prices them with the dated table in
// prices.go (PriceOf, PricesAsOf), cache reads and writes at their own
// rates. A model missing from the table, and any openai-compatible or
// scripted spec, gets no price (ok false) rather than a guessed one.
// Meter adds up the usage of the calls made through it.
package llm
