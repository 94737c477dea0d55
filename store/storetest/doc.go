// Package storetest is the conformance suite every store.Records passes
// (RunRecords), and the helpers that tests in other packages use to get a
// driver of each kind: in memory, SQLite in a temporary folder, and
// PostgreSQL in a fresh, migrated schema of its own (dropped when the test
// ends).
//
// A driver's tests run both suites against it:
//
//	checkpointtest.Run(t, func(t *testing.T) checkpoint.Saver { return newDriver(t) })
//	storetest.RunRecords(t, func(t *testing.T) store.Records { return newDriver(t) })
//
// ForEachDriver and ForEachSaver run a test once per driver, in subtests
// named memory, sqlite and postgres.
//
// PostgreSQL tests read TASKLOOM_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When no server
// answers they are skipped, unless CI=true, where they fail.
package storetest
