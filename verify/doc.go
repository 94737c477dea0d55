// Package verify runs a worktree's tests and returns a verdict: passed or
// failed, the failing tests with their output trimmed, and the duration.
//
// The exit code is the ground truth, with one exception. A command that
// exits non-zero or times out fails; one that exits 0 passes unless its
// runner's machine-readable report names a failing test (a TestMain that
// exits 0 whatever the tests did, a script ending in "|| true"). The
// report otherwise only explains a failure: it names each failing test as
// its runner names it, with its assertion message.
//
// Runners: go test (-json, the test2json stream), pytest (JUnit XML),
// jest (--json) and vitest (--reporter=json), each asked for its report
// by rewriting the command (see Run). The usual wrappers are seen
// through: npm test, npm run test, yarn test, pnpm test (the script in
// package.json) and make test (the target's recipe).
//
// What a retry reads is made to make sense in another worktree: paths
// are relative to the worktree, colour codes are stripped, the runner's
// own stack frames (jest's and vitest's in node_modules, Go's testing and
// runtime frames) are dropped, and each failure's output is trimmed to
// its head and tail. Names keep their structure: "TestParse/a/b" for a
// Go subtest named "a/b", "TestCart::test_total[a/b]" in
// "tests/test_cart.py", "cart > discount > applies" for nested describe
// blocks. When a report lacks a failure's cause (vitest's JSON has no
// message for a failing beforeAll) the cause is taken from the console.
//
// Every command runs through internal/proc, confined as Opts.ConfineFunc
// says: a reduced environment, the sandbox where the OS has one, the
// timeout killing everything the command started, and secret values
// redacted from the output and the reports.
package verify
