// Package graph is a typed state-graph runtime: taskloom's own LangGraph for
// Go. The pipeline's nodes (breakdown, selection, workers, verification,
// escalation) run on it, and "resume a crashed run" rests on its
// checkpoints.
//
// # State and reducers
//
// A graph runs over a state struct S whose exported fields are channels,
// each with its reducer:
//
//   - Value[T] is replaced by a write;
//   - Append[T] is extended by a write;
//   - Keyed[V] is merged by key: a write replaces or adds entries, and may
//     delete some.
//
// A node is a NodeFunc: it gets the state, which it must treat as
// read-only, and returns an update: a fresh S in which it sets only what it
// writes. Updates of the nodes of one super-step are merged in task order,
// the order in which the tasks were scheduled, never in the order they
// finished, so parallel branches combine deterministically.
//
// # Building and compiling
//
// New[S]() starts a graph; AddNode, AddInputNode, AddEdge, AddRouter and
// AddFanOut build it. Each checks its arguments at once (duplicate,
// reserved or unknown names, START and END misuse); the first error sticks
// and Compile returns it. Compile checks that every node is reachable from
// START, that routers' declared targets exist and that END can be reached,
// and freezes the graph. Each call runs at most StepLimit super-steps
// (ErrStepLimit).
//
// A RouterFunc picks one successor among its declared targets. A
// FanOutFunc returns Sends: several nodes, or N instances of one node each
// with its own input, which run concurrently in the next super-step. That
// is how taskloom runs N workers at once.
//
// # Checkpoints
//
// With a checkpoint.Saver, every super-step is checkpointed before the next
// one starts (DurabilitySync; DurabilityAsync overlaps the write with the
// next step). A checkpoint stores the step's writes, not the state: a Keyed
// write stores only the entries written, an Append write only what was
// appended. A full snapshot is added when the deltas written since the last
// snapshot outweigh it, so storage grows with what changed (about twice the
// size of the deltas) and a read replays at most one snapshot's worth of
// deltas.
//
// When a step has several tasks, each task's result is recorded as a
// pending write as soon as it finishes, before the step's checkpoint. If a
// sibling fails, or the process dies, Continue runs only the tasks that
// have no recorded result. One process at a time drives a thread: it holds
// the thread's lease, and every write carries the lease's fencing token, so
// two processes can never fork a thread; the second gets an error that
// wraps checkpoint.ErrThreadBusy and names the holder. A holder that died
// is taken over (at once on the same host, else when its lease expires).
//
// # Interrupts
//
// A node calls Interrupt to ask for a value from outside, such as a human's
// decision. The run stops with StatusInterrupted and the interrupt is
// stored durably. Resume delivers values by interrupt ID; Answer only
// records them. Several interrupts may be pending at once, from parallel
// branches or from one node; a node runs again only when all of its
// interrupts are answered, and siblings that finished are not run again.
//
// # Retries, events and history
//
// NodeOpts.Retry sets a node's attempts, its backoff (on the injected
// Clock) and which errors to retry. RunOpts.EventFunc receives events: step
// and node start and end (with durations), updates, retries, interrupts and
// errors. History lists a thread's checkpoints, State reads the state at
// any of them, Fork starts a new thread from one, UpdateState writes an
// update as if a named node had written it, and Prune keeps only the
// newest checkpoints.
//
// # Serialization
//
// States are stored as JSON. A value that cannot be encoded fails the step
// with a *SerializationError naming its path, such as
// state.tasks["T3"].score.
package graph
