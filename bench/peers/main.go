// Command peers measures taskloom's graph runtime against langgraphgo and
// eino, and against a plain Go loop, on the taskloop workload of
// graph/graphtest, interleaved in one process.
//
// Each runtime is warmed, then measured in rounds. A round gives every
// runtime about -sample of wall time, cut into -slices slices taken in
// turn (runtime A's first slice, B's first, ..., A's second, ...), each
// after a GC, with its inputs built and its final state checked outside
// the timer, and its allocations counted on a run of its own; the order
// rotates from slice to slice and round to round. So the runtimes of a
// round share the machine's load as it changes, which on a busy machine
// moves the absolute figures far more than the runtimes differ. The table
// gives, per T, the median steps/s over the rounds, their range, the
// allocations per step, and the median over the rounds of each runtime's
// ratio to the best peer and to the plain loop of the same round.
//
//	go -C bench/peers run . [-t 100,1000] [-rounds 15] [-sample 150ms] [-slices 10]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// measurement is one runtime's sample in one round.
type measurement struct {
	stepsPerSec float64
	allocs      float64 // per step
}

func run(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	sizes := fs.String("t", "100,1000", "comma-separated task counts T (a run is 3T super-steps)")
	rounds := fs.Int("rounds", 15, "measured rounds")
	sample := fs.Duration("sample", 150*time.Millisecond, "wall time of one runtime's sample in a round")
	cuts := fs.Int("slices", 10, "slices a sample is cut into, taken in turn with the other runtimes'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 || *cuts < 1 {
		return errors.New("-rounds and -slices must be at least 1")
	}
	fmt.Fprintf(w, "taskloop, no saver: %s, GOMAXPROCS %d, %d rounds of %s per runtime in %d slices\n",
		runtime.Version(), runtime.GOMAXPROCS(0), *rounds, *sample, *cuts)
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-t: bad task count %q", f)
		}
		if err := compare(w, n, *rounds, *cuts, *sample); err != nil {
			return fmt.Errorf("T=%d: %w", n, err)
		}
	}
	return nil
}

func compare(w io.Writer, n, rounds, cuts int, sample time.Duration) error {
	rs, err := runners(n)
	if err != nil {
		return err
	}
	steps := 3 * n
	for _, r := range rs {
		var warm tally
		for range 3 {
			if err := warm.measure(r, 0); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
	}
	got := make([][]measurement, len(rs))
	for round := range rounds {
		tallies := make([]tally, len(rs))
		for slice := range cuts {
			for k := range rs {
				i := (round + slice + k) % len(rs)
				if err := tallies[i].measure(rs[i], sample/time.Duration(cuts)); err != nil {
					return fmt.Errorf("%s: %w", rs[i].name, err)
				}
			}
		}
		for i := range rs {
			got[i] = append(got[i], tallies[i].measurement(steps))
		}
	}
	// The peers and the floor, by name, for the per-round ratios.
	peers := []int{indexOf(rs, "langgraphgo"), indexOf(rs, "eino")}
	plain := indexOf(rs, "plain Go loop")
	ratio := func(i int, den func(round int) float64) float64 {
		var rat []float64
		for round := range rounds {
			rat = append(rat, got[i][round].stepsPerSec/den(round))
		}
		return median(rat)
	}
	bestPeer := func(round int) float64 {
		return max(got[peers[0]][round].stepsPerSec, got[peers[1]][round].stepsPerSec)
	}
	fmt.Fprintf(w, "\nT=%d (%d super-steps a run)\n", n, steps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "runtime\tmedian steps/s\tmin\tmax\tallocs/step\t× best peer\t× plain loop\t")
	for i, r := range rs {
		var sps, allocs []float64
		for _, m := range got[i] {
			sps = append(sps, m.stepsPerSec)
			allocs = append(allocs, m.allocs)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.2f\t%.2f\t\n", r.name, median(sps), slices.Min(sps), slices.Max(sps),
			median(allocs), ratio(i, bestPeer), ratio(i, func(round int) float64 { return got[plain][round].stepsPerSec }))
	}
	return tw.Flush()
}

// tally sums one runtime's timed runs in a round, and the allocations of
// its untimed counting runs.
type tally struct {
	elapsed time.Duration
	runs    int
	mallocs uint64
	counted int
}

// measure runs r for about d of timed work (at least once), after a GC,
// and checks every final state. The allocations are counted on one more
// run, untimed, before the timed ones: ReadMemStats stops the world, and a
// stop between timed runs would shift the collector's phases under them.
func (t *tally) measure(r runner, d time.Duration) error {
	runtime.GC()
	var ms runtime.MemStats
	exec := r.prepare()
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	check, err := exec()
	runtime.ReadMemStats(&ms)
	t.mallocs += ms.Mallocs - before
	t.counted++
	if err == nil {
		err = check()
	}
	if err != nil {
		return fmt.Errorf("final state: %w", err)
	}
	for start := t.elapsed; t.elapsed == start || t.elapsed-start < d; {
		exec := r.prepare()
		begin := time.Now()
		check, err := exec()
		t.elapsed += time.Since(begin)
		if err != nil {
			return err
		}
		if err := check(); err != nil {
			return fmt.Errorf("final state: %w", err)
		}
		t.runs++
	}
	return nil
}

func (t *tally) measurement(steps int) measurement {
	return measurement{
		stepsPerSec: float64(t.runs*steps) / t.elapsed.Seconds(),
		allocs:      float64(t.mallocs) / float64(t.counted*steps),
	}
}

func indexOf(rs []runner, prefix string) int {
	return slices.IndexFunc(rs, func(r runner) bool { return strings.HasPrefix(r.name, prefix) })
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
