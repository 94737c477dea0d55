// Package checkpointtest is the conformance suite every checkpoint.Saver
// passes, and the helpers its tests share: an in-memory saver, the test
// PostgreSQL database (an empty schema of a test's own, dropped when the
// test ends) and StartPostgres, a throwaway server a test may stop and
// restart.
//
// A driver runs the suite against its saver with Run:
//
//	checkpointtest.Run(t, func(t *testing.T) checkpoint.Saver { return newSaver(t) })
//
// Package storetest runs it against every driver (memory, SQLite,
// PostgreSQL) and gives tests in other packages their savers.
//
// PostgreSQL tests read TASKLOOM_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When no server
// answers they are skipped, unless CI=true, where they fail.
package checkpointtest
