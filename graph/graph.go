package graph

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// START and END are the reserved names of a graph's entry and exit.
const (
	START = "__start__"
	END   = "__end__"
)

// NodeFunc is a node: it reads the state, which it must treat as read-only,
// and returns an update in which only the channels it writes are set.
type NodeFunc[S any] func(ctx context.Context, s S) (S, error)

// RouterFunc picks the one node that runs after its source node, among the
// targets declared with AddRouter. It sees the state after the step's
// updates are merged.
type RouterFunc[S any] func(ctx context.Context, s S) (string, error)

// FanOutFunc picks the nodes that run after its source node, possibly
// several instances of one node, each with its own input. All of them run
// concurrently in the next super-step. An empty result ends the branch.
type FanOutFunc[S any] func(ctx context.Context, s S) ([]Send, error)

// Send addresses one node instance of the next super-step. Input is handed
// to nodes added with AddInputNode; it must encode to JSON, and it must be
// of the node's input type.
type Send struct {
	Node  string
	Input any
}

// NodeOpts configures a node. Nil means defaults.
type NodeOpts struct {
	// Retry is the node's retry policy; nil means no retries.
	Retry *RetryPolicy
}

// Graph is a typed state graph under construction. Build it with AddNode,
// AddEdge, AddRouter and AddFanOut, then Compile it. The first error of a
// builder method sticks: later calls do nothing and Compile returns it.
type Graph[S any] struct {
	schema   *schema[S]
	nodes    map[string]*node[S]
	order    []string // node names in the order they were added
	edges    map[string][]string
	routers  map[string]*router[S]
	err      error
	compiled bool

	linkOnce sync.Once
	start    *node[S] // START's successors, linked as a node's are
}

type node[S any] struct {
	name string
	id0  string // the task ID of the node's first task in a step
	// plain is the function of a node added by AddNode, called directly;
	// run is an input node's, which decodes its input first.
	plain NodeFunc[S]
	run   func(ctx context.Context, s S, in *taskInput) (S, error)
	opts  NodeOpts
	input reflect.Type // nil for plain nodes

	// What follows the node, resolved once by link so that a step looks
	// nothing up by name: the tasks of its static edges, and its router.
	next   []taskSpec
	router *router[S]
}

type router[S any] struct {
	route   RouterFunc[S]
	fanOut  FanOutFunc[S]
	targets []string
	// by target, the task each target runs (END's is empty): a step
	// borrows these, read-only, as the tasks that follow it
	specs []taskSpec
}

// taskInput is a Send's input: live, or decoded later from JSON.
type taskInput struct {
	live any
	raw  []byte
}

// New returns an empty graph over the state type S. S must be a struct
// whose exported fields are channels: Value, Append or Keyed.
func New[S any]() *Graph[S] {
	g := &Graph[S]{nodes: map[string]*node[S]{}, edges: map[string][]string{}, routers: map[string]*router[S]{}}
	g.schema, g.err = newSchema[S]()
	return g
}

// Errors of graph construction and execution.
var (
	// ErrInvalidGraph is wrapped by every construction error.
	ErrInvalidGraph = errors.New("invalid graph")
	// ErrStepLimit means a run reached its step limit.
	ErrStepLimit = errors.New("graph: step limit reached")
)

func (g *Graph[S]) fail(format string, args ...any) error {
	if g.err == nil {
		g.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidGraph}, args...)...)
	}
	return g.err
}

func (g *Graph[S]) check() error {
	if g.err != nil {
		return g.err
	}
	if g.compiled {
		return g.fail("graph is compiled; it cannot be changed")
	}
	return nil
}

func (g *Graph[S]) addNode(n *node[S]) error {
	if err := g.check(); err != nil {
		return err
	}
	switch {
	case n.name == "":
		return g.fail("node name is empty")
	case n.name == START || n.name == END:
		return g.fail("node name %q is reserved", n.name)
	case g.nodes[n.name] != nil:
		return g.fail("node %q is added twice", n.name)
	}
	if n.opts.Retry != nil {
		if err := n.opts.Retry.validate(); err != nil {
			return g.fail("node %q: %v", n.name, err)
		}
	}
	n.id0 = taskID(n.name, 0)
	g.nodes[n.name] = n
	g.order = append(g.order, n.name)
	return nil
}

// AddNode adds a node.
func (g *Graph[S]) AddNode(name string, fn NodeFunc[S], opts *NodeOpts) error {
	if fn == nil {
		return g.fail("node %q has a nil function", name)
	}
	n := &node[S]{name: name, plain: fn}
	if opts != nil {
		n.opts = *opts
	}
	return g.addNode(n)
}

// AddInputNode adds a node that takes an input of type In from the Send
// that addresses it. Reached by a plain edge, it gets In's zero value.
func AddInputNode[S, In any](g *Graph[S], name string, fn func(ctx context.Context, s S, in In) (S, error), opts *NodeOpts) error {
	if fn == nil {
		return g.fail("node %q has a nil function", name)
	}
	n := &node[S]{name: name, input: reflect.TypeFor[In]()}
	n.run = func(ctx context.Context, s S, ti *taskInput) (S, error) {
		var in In
		if ti != nil {
			switch {
			case ti.live != nil:
				v, ok := ti.live.(In)
				if !ok {
					var zero S
					return zero, fmt.Errorf("input has type %T, node %q takes %s", ti.live, name, n.input)
				}
				in = v
			case ti.raw != nil:
				if err := jsonUnmarshal(ti.raw, &in); err != nil {
					var zero S
					return zero, fmt.Errorf("decode input of node %q: %w", name, err)
				}
			}
		}
		return fn(ctx, s, in)
	}
	if opts != nil {
		n.opts = *opts
	}
	return g.addNode(n)
}

// AddEdge adds a static edge: after from runs, to runs. from may be START;
// to may be END.
func (g *Graph[S]) AddEdge(from, to string) error {
	if err := g.check(); err != nil {
		return err
	}
	switch {
	case from == END:
		return g.fail("edge from END")
	case to == START:
		return g.fail("edge to START")
	case from != START && g.nodes[from] == nil:
		return g.fail("edge %s -> %s: unknown node %q", from, to, from)
	case to != END && g.nodes[to] == nil:
		return g.fail("edge %s -> %s: unknown node %q", from, to, to)
	case slices.Contains(g.edges[from], to):
		return g.fail("edge %s -> %s is added twice", from, to)
	}
	g.edges[from] = append(g.edges[from], to)
	return nil
}

func (g *Graph[S]) addRouter(from string, r *router[S]) error {
	if err := g.check(); err != nil {
		return err
	}
	switch {
	case from == END:
		return g.fail("router from END")
	case from != START && g.nodes[from] == nil:
		return g.fail("router from unknown node %q", from)
	case g.routers[from] != nil:
		return g.fail("node %q has two routers", from)
	case len(r.targets) == 0:
		return g.fail("router from %q declares no targets", from)
	}
	for _, t := range r.targets {
		if t == START {
			return g.fail("router from %q targets START", from)
		}
	}
	g.routers[from] = r
	return nil
}

// AddRouter adds a conditional edge from a node: fn picks the next node
// among targets (END included, if declared).
func (g *Graph[S]) AddRouter(from string, fn RouterFunc[S], targets ...string) error {
	if fn == nil {
		return g.fail("router from %q is nil", from)
	}
	return g.addRouter(from, &router[S]{route: fn, targets: targets})
}

// AddFanOut adds a conditional edge from a node that can address several
// nodes, or several instances of one, in the next super-step.
func (g *Graph[S]) AddFanOut(from string, fn FanOutFunc[S], targets ...string) error {
	if fn == nil {
		return g.fail("fan-out from %q is nil", from)
	}
	return g.addRouter(from, &router[S]{fanOut: fn, targets: targets})
}

// link resolves, once the graph can no longer change, what follows each
// node (and START) into node pointers.
func (g *Graph[S]) link() {
	g.linkOnce.Do(func() {
		g.start = &node[S]{name: START}
		hops := []*node[S]{g.start}
		for _, name := range g.order {
			hops = append(hops, g.nodes[name])
		}
		for _, n := range hops {
			for _, to := range g.edges[n.name] {
				if to != END {
					n.next = append(n.next, taskSpec{Node: to, node: g.nodes[to]})
				}
			}
			// Steps borrow the list: an append to it must copy.
			n.next = slices.Clip(n.next)
			if rt := g.routers[n.name]; rt != nil {
				rt.specs = make([]taskSpec, len(rt.targets))
				for i, to := range rt.targets {
					if to != END {
						rt.specs[i] = taskSpec{Node: to, node: g.nodes[to]}
					}
				}
				n.router = rt
			}
		}
	})
}

// hop returns the node named name, or START's pseudo-node; nil for an
// unknown name.
func (g *Graph[S]) hop(name string) *node[S] {
	if name == START {
		return g.start
	}
	return g.nodes[name]
}

// successors returns the declared successors of a node.
func (g *Graph[S]) successors(name string) []string {
	out := slices.Clone(g.edges[name])
	if r := g.routers[name]; r != nil {
		out = append(out, r.targets...)
	}
	return out
}

// validate is Compile's whole-graph check.
func (g *Graph[S]) validate() error {
	if g.err != nil {
		return g.err
	}
	if len(g.successors(START)) == 0 {
		return g.fail("no edge from START")
	}
	for from, r := range g.routers {
		for _, t := range r.targets {
			if t != END && g.nodes[t] == nil {
				return g.fail("router from %q: unknown target %q", from, t)
			}
		}
	}
	// Every node is reachable from START.
	seen := map[string]bool{START: true}
	stack := []string{START}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, s := range g.successors(n) {
			if !seen[s] {
				seen[s] = true
				if s != END {
					stack = append(stack, s)
				}
			}
		}
	}
	for _, n := range g.order {
		if !seen[n] {
			return g.fail("node %q is not reachable from START", n)
		}
	}
	if !seen[END] {
		return g.fail("END is not reachable from START")
	}
	// Every node has a way out: a node with no successor ends its branch,
	// which is allowed, but a node from which END cannot be reached at all
	// would loop until the step limit.
	canEnd := map[string]bool{END: true}
	for changed := true; changed; {
		changed = false
		for _, n := range g.order {
			if canEnd[n] {
				continue
			}
			succ := g.successors(n)
			if len(succ) == 0 {
				canEnd[n] = true
				changed = true
				continue
			}
			for _, s := range succ {
				if canEnd[s] {
					canEnd[n] = true
					changed = true
					break
				}
			}
		}
	}
	for _, n := range g.order {
		if !canEnd[n] {
			return g.fail("END cannot be reached from node %q", n)
		}
	}
	return nil
}
