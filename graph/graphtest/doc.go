// Package graphtest holds workloads that the graph package's benchmarks
// and the peer comparison under bench/peers share.
//
// Taskloop is the taskloop workload: a loop of select, implement and
// verify over T tasks whose dependencies point backwards, so that tasks
// complete in index order in 3T super-steps. The node bodies are plain
// functions over a task array (SelectReady, Implement, Complete,
// AnyPending), so that every runtime, and a plain Go loop, runs the same
// work; ArrayGraph and KeyedGraph wire them into graph.Graph with tasks as
// an array replaced each step, and as a keyed collection written one entry
// at a time.
package graphtest
