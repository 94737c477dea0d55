package repomap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/llm"
)

// project writes a small polyglot project: a Go module, a Python package
// and a TypeScript app, plus things a map leaves out.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                      "module example.com/shop\n\ngo 1.22\n",
		"store/store.go":              "package store\n\n// Store keeps orders.\ntype Store struct{}\n\nfunc New() *Store { return &Store{} }\n\nfunc (s *Store) Put(id string) error { return nil }\n\nfunc (s *Store) helper() {}\n\nconst MaxOrders = 10\n\nvar ErrFull = error(nil)\n\nfunc internal() {}\n",
		"store/store_test.go":         "package store\n\nfunc TestX() {}\n",
		"api/handler.go":              "package api\n\nfunc Handle() {}\n",
		"service/__init__.py":         "",
		"service/orders.py":           "import os\n\nclass OrderService:\n    def place(self):\n        pass\n\ndef list_orders():\n    pass\n\nasync def fetch():\n    pass\n\ndef _private():\n    pass\n",
		"web/package.json":            "{\"name\": \"shop-web\", \"version\": \"1.0.0\"}\n",
		"web/src/App.tsx":             "import React from 'react'\n\nexport default function App() { return null }\nexport const routes = []\nexport interface Props {}\nfunction local() {}\n",
		"web/src/api.ts":              "export async function getOrders() {}\nexport type Order = { id: string }\n",
		"web/node_modules/x/index.js": "export function leaked() {}\n",
		".env":                        "SECRET=1\n",
	}
	testkit.WriteFiles(t, dir, files)
	return dir
}

func TestBuildWalk(t *testing.T) {
	t.Parallel()
	dir := project(t)
	m, err := Build(dir)
	require.NoError(t, err)
	out := m.Render(100000)
	for _, want := range []string{
		"./ (go module example.com/shop, 1 files)",
		"store/ (go package store, 2 files)",
		"  store.go: Store, New, Store.Put, MaxOrders, ErrFull\n",
		"  store_test.go\n",
		"service/ (python package, 2 files)",
		"  orders.py: OrderService, list_orders, fetch\n",
		"web/ (npm package shop-web, 1 files)",
		"  App.tsx: App, routes, Props\n",
		"  api.ts: getOrders, Order\n",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "node_modules", "dependency folders are left out")
	require.NotContains(t, out, ".env", "hidden files are left out")
	require.NotContains(t, out, "helper")
	require.NotContains(t, out, "_private")
}

func TestBuildTrackedFilesOnly(t *testing.T) {
	t.Parallel()
	dir := project(t)
	testkit.Git(t, dir, "init", "-q")
	testkit.Git(t, dir, "add", "go.mod", "store", "web/src/api.ts")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "untracked.go"), []byte("package shop\n"), 0o644))
	m, err := Build(dir)
	require.NoError(t, err)
	require.Equal(t, 4, m.Files)
	out := m.Render(100000)
	require.Contains(t, out, "api.ts: getOrders, Order")
	require.NotContains(t, out, "untracked.go")
	require.NotContains(t, out, "orders.py")

	// A folder inside the repository maps its own files.
	sub, err := Build(filepath.Join(dir, "store"))
	require.NoError(t, err)
	require.Equal(t, 2, sub.Files)
}

func TestRenderFitsItsBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := 0; i < 60; i++ {
		p := filepath.Join(dir, "pkg"+strings.Repeat("x", i%7), "sub"+string(rune('a'+i%26)), "file.go")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("package p\n\nfunc Exported"+string(rune('A'+i%26))+"() {}\n"), 0o644))
	}
	m, err := Build(dir)
	require.NoError(t, err)
	full := m.Render(1 << 20)
	require.Contains(t, full, ": Exported")
	for _, budget := range []int{2000, 600, 300, 120, 40} {
		out := m.Render(budget)
		require.LessOrEqual(t, llm.EstimateTokens(out), budget, "budget %d:\n%s", budget, out)
		require.True(t, strings.HasPrefix(out, Header), "budget %d", budget)
	}
	require.NotContains(t, m.Render(300), ": Exported", "symbols go first")
	require.Contains(t, m.Render(120), "more folders not shown")
	require.Empty(t, m.Render(10), "not even the header fits")
}
