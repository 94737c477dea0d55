package postgres

import (
	"context"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/store"
)

// PutRetried is Put's try after a failure that may have committed.
func (p *Driver) PutRetried(ctx context.Context, lease checkpoint.Lease, cp checkpoint.Checkpoint) error {
	return p.put(ctx, lease, cp, true)
}

// CreateRunRetried is CreateRun's try after a failure that may have
// committed.
func (p *Driver) CreateRunRetried(ctx context.Context, r store.Run) error {
	return p.createRun(ctx, r, true)
}
