package llm

import (
	"context"
	"sync"
)

// callInfo is what the transport learns about one model call that
// langchaingo's clients drop on the way back: the provider error in full,
// and whether the reply carried usage. The guarded model puts one in the
// context of each call.
type callInfo struct {
	mu    sync.Mutex
	err   *ProviderError
	usage bool
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	ci := &callInfo{}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

// callInfoFrom returns the context's callInfo, or nil; the methods accept
// a nil receiver.
func callInfoFrom(ctx context.Context) *callInfo {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	return ci
}

func (c *callInfo) fail(err *ProviderError) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *callInfo) sawUsage(ok bool) {
	if c == nil || !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.usage = true
}

func (c *callInfo) result() (*ProviderError, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err, c.usage
}
