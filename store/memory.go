package store

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
)

var _ Driver = (*Memory)(nil)

// Memory is a Driver that keeps everything in process memory: a
// checkpoint.Memory and the records beside it.
type Memory struct {
	*checkpoint.Memory
	*MemoryRecords
}

// NewMemory returns an empty in-memory driver.
func NewMemory() *Memory {
	return &Memory{Memory: checkpoint.NewMemory(), MemoryRecords: NewMemoryRecords()}
}

// Migrate implements Driver: memory has no schema.
func (m *Memory) Migrate(context.Context) (*migrations.Result, error) {
	return &migrations.Result{Direction: migrations.Up}, nil
}

var _ Records = (*MemoryRecords)(nil)

// MemoryRecords is Records in process memory. It is safe for concurrent
// use.
type MemoryRecords struct {
	mu        sync.Mutex
	runs      map[string]Run
	histories map[[2]string]History // by run ID and conversation ID
}

// NewMemoryRecords returns empty records.
func NewMemoryRecords() *MemoryRecords {
	return &MemoryRecords{runs: map[string]Run{}, histories: map[[2]string]History{}}
}

func cloneRun(r Run) Run {
	r.Meta = slices.Clone(r.Meta)
	return r
}

// CreateRun implements Records.
func (m *MemoryRecords) CreateRun(_ context.Context, r Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[r.ID]; ok {
		return ErrRunExists
	}
	m.runs[r.ID] = cloneRun(r)
	return nil
}

// SetRunStatus implements Records.
func (m *MemoryRecords) SetRunStatus(_ context.Context, id, status string, updatedAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return ErrRunNotFound
	}
	r.Status, r.UpdatedAt = status, updatedAt
	m.runs[id] = r
	return nil
}

// GetRun implements Records.
func (m *MemoryRecords) GetRun(_ context.Context, id string) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return Run{}, ErrRunNotFound
	}
	return cloneRun(r), nil
}

// ListRuns implements Records.
func (m *MemoryRecords) ListRuns(_ context.Context, params ListRunsParams) ([]Run, error) {
	m.mu.Lock()
	var out []Run
	for _, r := range m.runs {
		if params.Repo == "" || r.Repo == params.Repo {
			out = append(out, cloneRun(r))
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	if params.Limit > 0 && len(out) > params.Limit {
		out = out[:params.Limit]
	}
	return out, nil
}

// SaveHistory implements Records.
func (m *MemoryRecords) SaveHistory(_ context.Context, h History) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.histories[[2]string{h.RunID, h.ConversationID}] = h
	return nil
}

// GetHistory implements Records.
func (m *MemoryRecords) GetHistory(_ context.Context, runID, conversationID string) (History, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.histories[[2]string{runID, conversationID}]
	if !ok {
		return History{}, ErrNotFound
	}
	return h, nil
}

// AttemptMetas implements Records.
func (m *MemoryRecords) AttemptMetas(_ context.Context, runID, taskID string, attempt int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, h := range m.histories {
		if k[0] == runID && h.TaskID == taskID && h.Attempt == attempt && h.ParentID == "" {
			out = append(out, h.Meta)
		}
	}
	return out, nil
}

// RootConversations implements Records.
func (m *MemoryRecords) RootConversations(_ context.Context, runID, taskID string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, h := range m.histories {
		if k[0] == runID && h.TaskID == taskID && h.ParentID == "" {
			out = append(out, h.ConversationID)
		}
	}
	return out, nil
}
