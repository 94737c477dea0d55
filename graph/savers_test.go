package graph_test

import (
	"testing"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/store/storetest"
)

type namedSaver struct {
	name string
	open func(testing.TB) checkpoint.Saver
}

// benchSavers are the savers the runtime is tested and measured on: none
// (no persistence), memory, sqlite and postgres.
func benchSavers(tb testing.TB) []namedSaver {
	return []namedSaver{
		{name: "none"},
		{name: "memory", open: func(tb testing.TB) checkpoint.Saver { return storetest.NewMemory(tb) }},
		{name: "sqlite", open: func(tb testing.TB) checkpoint.Saver { return storetest.NewSQLite(tb) }},
		{name: "postgres", open: func(tb testing.TB) checkpoint.Saver { return storetest.NewPostgres(tb) }},
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

// forEachStoringSaver is forEachSaver for tests of what a saver keeps: the
// subtest without a saver is skipped.
func forEachStoringSaver(t *testing.T, fn func(t *testing.T, saver checkpoint.Saver)) {
	forEachSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		if saver == nil {
			t.Skip("needs a saver")
		}
		fn(t, saver)
	})
}
