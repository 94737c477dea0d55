package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
)

// Driver is one database taskloom keeps its records in: the graph's
// checkpoints and the app's runs and agent histories. Drivers are safe for
// concurrent use. Close, from checkpoint.Saver, closes the database.
type Driver interface {
	checkpoint.Saver
	Records
	// Migrate applies the migrations the database lacks.
	Migrate(ctx context.Context) (*migrations.Result, error)
}

// Records stores the app's own records beside the checkpoints: runs and
// agent conversation histories. Times given to it are in UTC and whole
// microseconds; it returns them in UTC. Operations that fail because the
// store went away are retried as the driver's saver retries its own.
type Records interface {
	// CreateRun stores a new run; a stored run with the same ID is
	// ErrRunExists.
	CreateRun(ctx context.Context, r Run) error
	// SetRunStatus sets a run's status and UpdatedAt; an unknown run is
	// ErrRunNotFound.
	SetRunStatus(ctx context.Context, id, status string, updatedAt time.Time) error
	// GetRun returns a run; an unknown one is ErrRunNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns returns runs newest first, by CreatedAt and then ID.
	ListRuns(ctx context.Context, params ListRunsParams) ([]Run, error)
	// SaveHistory stores a conversation's history, replacing the stored
	// one whole, in one statement.
	SaveHistory(ctx context.Context, h History) error
	// GetHistory returns a conversation's history; an unknown one is
	// ErrNotFound.
	GetHistory(ctx context.Context, runID, conversationID string) (History, error)
	// RootConversations returns the IDs of a task's conversations without a
	// parent, in no particular order.
	RootConversations(ctx context.Context, runID, taskID string) ([]string, error)
	// AttemptMetas returns the Meta of an attempt's conversations without
	// a parent, in no particular order: what a look at usage needs, read
	// without the conversations themselves.
	AttemptMetas(ctx context.Context, runID, taskID string, attempt int) ([]string, error)
}

// Run is a run's registry entry.
type Run struct {
	ID          string `json:"id"`
	ProductPath string `json:"product_path"`
	Repo        string `json:"repo"`
	// Status is one of the run statuses the app defines (running,
	// interrupted, completed…).
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Meta is a JSON value; empty means {}.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// ListRunsParams selects the runs ListRuns returns.
type ListRunsParams struct {
	// Repo keeps the runs on this repo; "" keeps every run.
	Repo string
	// Limit > 0 keeps the first Limit runs.
	Limit int
}

// History is one agent conversation as stored: its place (run, task,
// attempt, parent) and its records as JSON text.
type History struct {
	RunID          string
	ConversationID string
	// ParentID is "" for a root conversation.
	ParentID string
	TaskID   string
	Attempt  int
	// UI, API and Meta are JSON: the UI messages, the API conversation
	// history and the conversation's metadata.
	UI, API, Meta string
	UpdatedAt     time.Time
}

var (
	// ErrRunNotFound means the store holds no such run.
	ErrRunNotFound = errors.New("run not found")
	// ErrRunExists means CreateRun was given the ID of a stored run.
	ErrRunExists = errors.New("run already exists")
	// ErrNotFound means the store holds no such record.
	ErrNotFound = errors.New("store: not found")
	// ErrNoSchema means the database has no taskloom tables: it was opened
	// without migrating and never migrated.
	ErrNoSchema = errors.New("store: no taskloom tables")
)
