// Package runview shows a pipeline run as it goes, in one of three forms:
//
//   - On a terminal, a live view drawn in place with Bubble Tea and Lip
//     Gloss: one row per worker with its task, attempt, elapsed time,
//     current activity (the tool and its path, "running tests", "waiting
//     for provider 12s"), tokens and cost; then the totals, the run's usage
//     and cost, and an ETA from the schedule estimate (scheduler.Simulate
//     over the tasks left). Every line is cut to the terminal's width, long
//     paths in their middle. NO_COLOR turns colour off.
//   - Elsewhere, plain lines: the run's log, one line per entry.
//   - With JSON, the events of nodes.RunEvent, one object per line.
//
// A View hears the graph's events, the attempts' activities and the
// provider's waits, and ends with Finish, which says what happened to
// every task: integrated (commit), no change, fixed by hand, skipped, blocked (by what),
// failed (why), with the usage and cost.
package runview
