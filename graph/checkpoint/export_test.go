package checkpoint

import "context"

// PutRetried is Put's try after a failure that may have committed.
func (p *Postgres) PutRetried(ctx context.Context, lease Lease, cp Checkpoint) error {
	return p.put(ctx, lease, cp, true)
}

// TransientPG exposes the classification of pgx errors.
var TransientPG = transientPG
