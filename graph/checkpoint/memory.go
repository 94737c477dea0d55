package checkpoint

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

var _ Saver = (*Memory)(nil)

// Memory is a Saver that keeps everything in process memory. It is safe for
// concurrent use.
type Memory struct {
	mu      sync.Mutex
	threads map[string]*memThread
}

type memThread struct {
	cps       []Checkpoint // in step order; cps[0] may be past step 0 after Prune
	writes    []Write
	lease     Lease
	released  bool
	tokens    int64
	ttl       time.Duration
	createdAt time.Time
	updatedAt time.Time
}

// NewMemory returns an empty in-memory saver.
func NewMemory() *Memory {
	return &Memory{threads: map[string]*memThread{}}
}

func (t *memThread) head() int64 {
	if len(t.cps) == 0 {
		return -1
	}
	return t.cps[len(t.cps)-1].Step
}

// Acquire implements Saver.
func (m *Memory) Acquire(_ context.Context, threadID, holder string, now time.Time, ttl time.Duration) (Lease, error) {
	storeClock := now.IsZero()
	if storeClock {
		now = time.Now() // the store's clock is the process's
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.threads[threadID]
	if t == nil {
		t = &memThread{createdAt: now, updatedAt: now, released: true}
		m.threads[threadID] = t
	}
	if !t.released && t.lease.Holder != holder && now.Before(t.lease.Expires) {
		return Lease{}, &BusyError{ThreadID: threadID, Holder: t.lease.Holder, Expires: t.lease.Expires}
	}
	if t.released || t.lease.Holder != holder || !now.Before(t.lease.Expires) {
		t.tokens++
	}
	t.released = false
	t.ttl = ttl
	t.lease = Lease{ThreadID: threadID, Holder: holder, Token: t.tokens, Expires: now.Add(ttl), StoreClock: storeClock}
	return t.lease, nil
}

// Release implements Saver.
func (m *Memory) Release(_ context.Context, lease Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.threads[lease.ThreadID]; t != nil && !t.released && t.lease.Token == lease.Token {
		t.released = true
	}
	return nil
}

func (m *Memory) check(lease Lease) (*memThread, error) {
	t := m.threads[lease.ThreadID]
	if t == nil || t.released || t.lease.Token != lease.Token {
		return nil, ErrLeaseLost
	}
	return t, nil
}

// Put implements Saver.
func (m *Memory) Put(_ context.Context, lease Lease, cp Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.check(lease)
	if err != nil {
		return err
	}
	if cp.Step != t.head()+1 {
		return ErrConflict
	}
	cp.ThreadID = lease.ThreadID
	t.cps = append(t.cps, cloneCheckpoint(cp))
	t.updatedAt = cp.CreatedAt
	renewAt := cp.CreatedAt
	if lease.StoreClock {
		renewAt = time.Now()
	}
	t.lease.Expires = renewAt.Add(t.ttl)
	// Writes of steps up to the new head are settled by it.
	t.writes = slices.DeleteFunc(t.writes, func(w Write) bool { return w.Step <= cp.Step })
	return nil
}

// PutWrites implements Saver.
func (m *Memory) PutWrites(_ context.Context, lease Lease, writes []Write) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.check(lease)
	if err != nil {
		return err
	}
	for _, w := range writes {
		w.ThreadID = lease.ThreadID
		w.Payload = slices.Clone(w.Payload)
		t.writes = slices.DeleteFunc(t.writes, func(o Write) bool {
			return o.Step == w.Step && o.TaskID == w.TaskID && o.Kind == w.Kind
		})
		t.writes = append(t.writes, w)
	}
	return nil
}

// Load implements Saver.
func (m *Memory) Load(_ context.Context, threadID string, step int64) (Loaded, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.threads[threadID]
	if t == nil || len(t.cps) == 0 {
		return Loaded{}, ErrNotFound
	}
	head := t.head()
	if step < 0 {
		step = head
	}
	i := sort.Search(len(t.cps), func(i int) bool { return t.cps[i].Step >= step })
	if i == len(t.cps) || t.cps[i].Step != step {
		return Loaded{}, ErrNotFound
	}
	start := i
	for start > 0 && t.cps[start].Snapshot == nil {
		start--
	}
	out := Loaded{Head: head, Chain: make([]Checkpoint, 0, i+1-start)}
	for _, c := range t.cps[start : i+1] {
		out.Chain = append(out.Chain, cloneCheckpoint(c))
	}
	if step == head {
		for _, w := range t.writes {
			if w.Step == head+1 {
				w.Payload = slices.Clone(w.Payload)
				out.Writes = append(out.Writes, w)
			}
		}
	}
	return out, nil
}

// List implements Saver.
func (m *Memory) List(_ context.Context, threadID string, limit int) ([]Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.threads[threadID]
	if t == nil {
		return nil, ErrNotFound
	}
	var out []Checkpoint
	for i := len(t.cps) - 1; i >= 0; i-- {
		if limit > 0 && len(out) == limit {
			break
		}
		c := t.cps[i]
		c.Deltas, c.Snapshot, c.Next = nil, nil, nil
		out = append(out, cloneCheckpoint(c))
	}
	return out, nil
}

// Threads implements Saver.
func (m *Memory) Threads(context.Context) ([]ThreadInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ThreadInfo, 0, len(m.threads))
	for id, t := range m.threads {
		info := ThreadInfo{ThreadID: id, Head: t.head(), CreatedAt: t.createdAt, UpdatedAt: t.updatedAt}
		if !t.released {
			info.Holder, info.Expires = t.lease.Holder, t.lease.Expires
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.After(out[j].UpdatedAt)
		}
		return out[i].ThreadID < out[j].ThreadID
	})
	return out, nil
}

// Prune implements Saver.
func (m *Memory) Prune(_ context.Context, lease Lease, keepFrom int64, snapshot []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.check(lease)
	if err != nil {
		return err
	}
	i := sort.Search(len(t.cps), func(i int) bool { return t.cps[i].Step >= keepFrom })
	if i == len(t.cps) || t.cps[i].Step != keepFrom {
		return ErrNotFound
	}
	t.cps[i].Snapshot = slices.Clone(snapshot)
	t.cps = slices.Clone(t.cps[i:])
	t.writes = slices.DeleteFunc(t.writes, func(w Write) bool { return w.Step < keepFrom })
	return nil
}

// cloneCheckpoint copies c's slices, so that neither the caller nor the
// saver sees the other's later changes to them.
func cloneCheckpoint(c Checkpoint) Checkpoint {
	c.Writers = slices.Clone(c.Writers)
	c.Deltas = slices.Clone(c.Deltas)
	c.Snapshot = slices.Clone(c.Snapshot)
	c.Next = slices.Clone(c.Next)
	c.Meta = slices.Clone(c.Meta)
	return c
}

// Close implements Saver.
func (m *Memory) Close() error { return nil }
