// Package e2e holds taskloom's end-to-end tests that drive the built
// taskloom binary as a user does, in real git repos, and kill it with
// SIGKILL at named points of the pipeline to check that resume finishes the
// run as if nothing happened. They are the suite's longest tests, so they
// live apart from the packages they exercise: `go test ./...` reports every
// other package before waiting on them (go test prints packages in import
// path order), and `go test -short ./...` skips them.
//
// The CLI's own tests, which run it in process, stay in cmd/taskloom.
package e2e
