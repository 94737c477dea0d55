package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing/fstest"

	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store/sqlite"
)

// Migrating a SQLite database twice applies the SQLite driver's
// migrations once.
func ExampleMigrator_Migrate() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "migrations-example")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	db, err := sql.Open("sqlite", filepath.Join(dir, "taskloom.db"))
	if err != nil {
		panic(err)
	}
	defer func() { _ = db.Close() }()

	m, err := sqlite.NewMigrator(db, nil)
	if err != nil {
		panic(err)
	}
	for range 2 {
		res, err := m.Migrate(ctx, migrations.Up, nil)
		if err != nil {
			panic(err)
		}
		for _, v := range res.Versions {
			fmt.Println("applied", v.ID())
		}
		fmt.Println("at version", res.Version)
	}
	// Output:
	// applied 001_init
	// applied 002_attempt_leases
	// at version 2
	// at version 2
}

// Parse refuses a set of migrations with a gap.
func ExampleParse() {
	_, err := migrations.Parse(fstest.MapFS{
		"001_init.up.sql":    {Data: []byte("CREATE TABLE a (id int)")},
		"001_init.down.sql":  {Data: []byte("DROP TABLE a")},
		"003_later.up.sql":   {Data: []byte("CREATE TABLE c (id int)")},
		"003_later.down.sql": {Data: []byte("DROP TABLE c")},
	})
	fmt.Println(err)
	// Output: migration versions have a gap: 002 is missing
}
