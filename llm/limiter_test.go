package llm

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkLimiterThroughput has three workers share a limiter set to
// 60,000 requests a minute on the real clock, and reports the rate they
// got and its ratio to the configured one.
func BenchmarkLimiterThroughput(b *testing.B) {
	const perMinute = 60000
	l := NewLimiter(perMinute, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	start := time.Now()
	for range 3 {
		wg.Go(func() {
			for range jobs {
				if _, _, err := l.Wait(ctx); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for range b.N {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	// The first request goes at once: n requests span n-1 intervals.
	got := float64(b.N-1) / elapsed.Minutes()
	b.ReportMetric(got, "requests/min")
	b.ReportMetric(got/perMinute, "of_configured_rate")
}
