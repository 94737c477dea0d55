package graph_test

import (
	"testing"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

type namedSaver struct {
	name string
	open func(testing.TB) checkpoint.Saver
}

func benchSavers(tb testing.TB) []namedSaver {
	return []namedSaver{
		{name: "none"},
		{name: "memory", open: func(testing.TB) checkpoint.Saver { return checkpoint.NewMemory() }},
	}
}

// forEachSaver runs fn as subtests named by saver: none, memory, sqlite,
// postgres.
func forEachSaver(t *testing.T, fn func(t *testing.T, saver checkpoint.Saver)) {
	for _, sv := range benchSavers(t) {
		t.Run(sv.name, func(t *testing.T) {
			var saver checkpoint.Saver
			if sv.open != nil {
				saver = sv.open(t)
			}
			fn(t, saver)
		})
	}
}
