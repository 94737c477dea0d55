// Package checkpointtest is the conformance suite every checkpoint.Saver
// passes, and the helpers that tests in other packages use to get savers:
// in memory, SQLite in a temporary folder, and PostgreSQL in a fresh,
// migrated schema of its own (dropped when the test ends).
//
// Run the suite against a saver with Run, or against all three with
//
//	checkpointtest.ForEachSaver(t, func(t *testing.T, newSaver checkpointtest.NewSaverFunc) {
//		checkpointtest.Run(t, newSaver)
//	})
//
// which names the subtests memory, sqlite and postgres.
//
// PostgreSQL tests read TASKLOOM_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When no server
// answers they are skipped, unless CI=true, where they fail.
package checkpointtest
