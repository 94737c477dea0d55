package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopContext returns a context that the first Ctrl-C or SIGTERM cancels:
// the run stops where it is, resumable (exit 130). A second one ends the
// process at once.
func stopContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
			signal.Reset(os.Interrupt, syscall.SIGTERM)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}
