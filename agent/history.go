package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// ErrNotFound is returned by a HistoryStore that holds no conversation with
// the requested ID.
var ErrNotFound = errors.New("conversation not found")

// File names of an exported (or file-stored) conversation, as Roo-Code
// lays them out.
const (
	UIMessagesFile      = "ui_messages.json"
	APIHistoryFile      = "api_conversation_history.json"
	TaskMetadataFile    = "task_metadata.json"
	subtaskFolderPrefix = "subtask-"
)

// UI message kinds. A UI message is either a "say" (something that happened)
// or an "ask" (something that needs a person).
const (
	UISay = "say"
	UIAsk = "ask"

	SayTask             = "task"              // the first user message
	SayText             = "text"              // the model's text
	SayTool             = "tool"              // a tool call and its result
	SayError            = "error"             // a rejected call, a refusal, a model error
	SayCompletionResult = "completion_result" // an accepted attempt_completion
	SayCondense         = "condense_context"  // a condensation and its summary
	SaySubtaskResult    = "subtask_result"    // a child's result returned to its parent
	SayAPIRequest       = "api_req"           // one model call with its usage
	SayUserFeedback     = "user_feedback"     // a note or answer given on resume

	AskFollowup = "followup" // ask_followup_question
)

// UIMessage is one entry of the history a person reads (ui_messages.json).
type UIMessage struct {
	// TS is the time in Unix milliseconds.
	TS   int64  `json:"ts"`
	Type string `json:"type"`
	Say  string `json:"say,omitempty"`
	Ask  string `json:"ask,omitempty"`
	Text string `json:"text,omitempty"`
	// Tool is set on tool entries.
	Tool *UITool `json:"tool,omitempty"`
	// Tokens and CostUSD are set on api_req and condense_context entries.
	Tokens  *Usage `json:"tokens,omitempty"`
	ChildID string `json:"child_id,omitempty"`
}

// UITool describes one tool call in the UI history.
type UITool struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the argument string exactly as the model sent it.
	Arguments string `json:"arguments"`
	Path      string `json:"path,omitempty"`
	// Result is the tool_result content, shortened for reading.
	Result  string `json:"result,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// API message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Block types of an API message.
const (
	BlockText       = "text"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// APIMessage is one entry of the history the model sees
// (api_conversation_history.json), in Anthropic's shape: tool results are
// blocks of a user message.
type APIMessage struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
	TS      int64   `json:"ts,omitempty"`
	// IsSummary marks a condensation summary. The newest visible summary is
	// sent to the model after the task text of the first user message.
	IsSummary  bool   `json:"is_summary,omitempty"`
	CondenseID string `json:"condense_id,omitempty"`
	// CondenseParent is set on messages a condensation replaced: they stay in
	// the history but are no longer sent to the model.
	CondenseParent string `json:"condense_parent,omitempty"`
}

// Block is one content block of an API message.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// RawInput holds arguments that were not a JSON object, verbatim.
	RawInput string `json:"raw_input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
}

// Conversation statuses recorded in Metadata.Status.
const (
	StatusActive          = "active"
	StatusAwaitingSubtask = "awaiting_subtask"
	StatusCompleted       = "completed"
	StatusQuestion        = "question"
	StatusStopped         = "stopped"
)

// Metadata is task_metadata.json: what a conversation is and where it stands.
type Metadata struct {
	ID       string   `json:"id"`
	ParentID string   `json:"parent_id,omitempty"`
	RootID   string   `json:"root_id"`
	ChildIDs []string `json:"child_ids,omitempty"`
	Mode     string   `json:"mode"`
	Status   string   `json:"status"`
	Reason   Reason   `json:"reason,omitempty"`
	// Worktree is the directory the conversation works in.
	Worktree string `json:"worktree"`
	Depth    int    `json:"depth"`
	Turns    int    `json:"turns"`
	// Usage is this conversation's own model usage; SubtaskUsage is the sum
	// of its finished children's (whole subtree) usage.
	Usage         Usage    `json:"usage"`
	SubtaskUsage  Usage    `json:"subtask_usage"`
	Todos         []Todo   `json:"todos,omitempty"`
	FilesChanged  []string `json:"files_changed,omitempty"`
	Condensations int      `json:"condensations,omitempty"`
	// PendingChild is set while a new_task child runs: the parent's
	// tool_use waiting for the child's result.
	PendingChild *PendingChild `json:"pending_child,omitempty"`
	// PendingQuestion is set after ask_followup_question ended the loop.
	PendingQuestion *PendingQuestion `json:"pending_question,omitempty"`
	Completion      string           `json:"completion,omitempty"`
	Error           string           `json:"error,omitempty"`
	CreatedAt       int64            `json:"created_at"`
	UpdatedAt       int64            `json:"updated_at"`
}

// PendingChild links a parent's new_task call to the child running it.
type PendingChild struct {
	ToolUseID string `json:"tool_use_id"`
	ChildID   string `json:"child_id"`
}

// PendingQuestion is an unanswered ask_followup_question.
type PendingQuestion struct {
	ToolUseID string `json:"tool_use_id"`
	Question  string `json:"question"`
}

// TreeUsage is the conversation's usage plus its finished subtasks'.
func (m *Metadata) TreeUsage() Usage {
	u := m.Usage
	u.Add(m.SubtaskUsage)
	return u
}

// Record is everything persisted for one conversation. It is plain JSON.
type Record struct {
	Meta Metadata     `json:"meta"`
	UI   []UIMessage  `json:"ui"`
	API  []APIMessage `json:"api"`
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("agent: marshal record: %v", err)) // only plain data: cannot happen
	}
	var out Record
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("agent: unmarshal record: %v", err))
	}
	return &out
}

// HistoryStore persists conversations. Save replaces the whole record of
// rec.Meta.ID, atomically: a reader sees the old record or the new one.
// Load returns ErrNotFound (wrapped or not) for an unknown ID.
type HistoryStore interface {
	Save(ctx context.Context, rec *Record) error
	Load(ctx context.Context, id string) (*Record, error)
}

var (
	_ HistoryStore = (*MemoryStore)(nil)
	_ HistoryStore = (*FileStore)(nil)
)

// MemoryStore is a HistoryStore in memory, safe for concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string]*Record
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{recs: make(map[string]*Record)}
}

// Save implements HistoryStore.
func (s *MemoryStore) Save(ctx context.Context, rec *Record) error {
	if rec.Meta.ID == "" {
		return errors.New("save conversation: empty id")
	}
	c := rec.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[rec.Meta.ID] = c
	return nil
}

// Load implements HistoryStore.
func (s *MemoryStore) Load(ctx context.Context, id string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[id]
	if !ok {
		return nil, fmt.Errorf("load conversation %s: %w", id, ErrNotFound)
	}
	return r.Clone(), nil
}

// IDs returns the stored conversation IDs, sorted.
func (s *MemoryStore) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.recs))
}

// FileStore keeps each conversation in its own folder under Root, named by
// the path-escaped conversation ID, holding ui_messages.json,
// api_conversation_history.json and task_metadata.json. Each file is
// written to a temporary file and renamed into place; the metadata is
// written last, so a crash between the renames loses at most the newest
// metadata update, which resume tolerates.
type FileStore struct {
	Root string
}

// NewFileStore returns a FileStore rooted at dir.
func NewFileStore(dir string) *FileStore { return &FileStore{Root: dir} }

// Dir returns the folder of conversation id.
func (s *FileStore) Dir(id string) string {
	return filepath.Join(s.Root, url.PathEscape(id))
}

// Save implements HistoryStore.
func (s *FileStore) Save(ctx context.Context, rec *Record) error {
	if rec.Meta.ID == "" {
		return errors.New("save conversation: empty id")
	}
	if err := writeRecordFiles(s.Dir(rec.Meta.ID), rec); err != nil {
		return fmt.Errorf("save conversation %s: %w", rec.Meta.ID, err)
	}
	return nil
}

// Load implements HistoryStore.
func (s *FileStore) Load(ctx context.Context, id string) (*Record, error) {
	dir := s.Dir(id)
	var rec Record
	if err := readJSON(filepath.Join(dir, TaskMetadataFile), &rec.Meta); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("load conversation %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("load conversation %s: %w", id, err)
	}
	if err := readJSON(filepath.Join(dir, UIMessagesFile), &rec.UI); err != nil {
		return nil, fmt.Errorf("load conversation %s: %w", id, err)
	}
	if err := readJSON(filepath.Join(dir, APIHistoryFile), &rec.API); err != nil {
		return nil, fmt.Errorf("load conversation %s: %w", id, err)
	}
	return &rec, nil
}

func writeRecordFiles(dir string, rec *Record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ui, api := rec.UI, rec.API
	if ui == nil {
		ui = []UIMessage{}
	}
	if api == nil {
		api = []APIMessage{}
	}
	if err := writeJSONAtomic(filepath.Join(dir, APIHistoryFile), api); err != nil {
		return err
	}
	if err := writeJSONAtomic(filepath.Join(dir, UIMessagesFile), ui); err != nil {
		return err
	}
	return writeJSONAtomic(filepath.Join(dir, TaskMetadataFile), rec.Meta)
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	data = append(data, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), werr)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", filepath.Base(path), err)
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Export writes conversation id from store into dir as ui_messages.json,
// api_conversation_history.json and task_metadata.json, and each child
// conversation, recursively, into a subfolder subtask-<n> (n counts from 1
// in the order the children were started).
func Export(ctx context.Context, store HistoryStore, id, dir string) error {
	return export(ctx, store, id, dir, 0)
}

func export(ctx context.Context, store HistoryStore, id, dir string, depth int) error {
	if depth > 32 {
		return fmt.Errorf("export conversation %s: subtasks nested too deeply", id)
	}
	rec, err := store.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := writeRecordFiles(dir, rec); err != nil {
		return fmt.Errorf("export conversation %s: %w", id, err)
	}
	for i, child := range rec.Meta.ChildIDs {
		sub := filepath.Join(dir, fmt.Sprintf("%s%d", subtaskFolderPrefix, i+1))
		if err := export(ctx, store, child, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// ConversationID returns the ID the agent worker gives the conversation of
// one task attempt: RUN_ID/TASK_ID/ATTEMPT, like the integration trailer,
// with "/i<n>" appended for the n-th Ralph iteration.
func ConversationID(runID, taskID string, attempt, iteration int) string {
	id := fmt.Sprintf("%s/%s/%d", runID, taskID, attempt)
	if iteration > 0 {
		id += fmt.Sprintf("/i%d", iteration)
	}
	return id
}

func childID(parent string, n int) string {
	return fmt.Sprintf("%s.%d", parent, n)
}

// shorten keeps s readable in the UI history.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d more bytes]", len(s)-cut)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
