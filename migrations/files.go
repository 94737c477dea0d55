package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change and its inverse.
type Migration struct {
	Version int
	// Name is the snake_case part of the file name, for example "init".
	Name string
	Up   string
	Down string
}

// ID is the migration's file stem, for example "001_init".
func (m Migration) ID() string { return fmt.Sprintf("%03d_%s", m.Version, m.Name) }

// ParseDir is Parse on the folder dir of fsys: a driver's embedded
// migrations/ folder.
func ParseDir(fsys fs.FS, dir string) ([]Migration, error) {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	return Parse(sub)
}

var fileRE = regexp.MustCompile(`^([0-9]{3})_([a-z0-9]+(?:_[a-z0-9]+)*)\.(up|down)\.sql$`)

// Parse reads the migrations in the top folder of fsys: files named
// NNN_snake_name.up.sql and NNN_snake_name.down.sql. It refuses other .sql
// names, a version with two names, a version without both halves, numbering
// that does not run 1, 2, 3… without gaps, and CREATE INDEX CONCURRENTLY
// (every migration runs inside a transaction).
func Parse(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	seen := map[int]map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name must be NNN_snake_name.up.sql or NNN_snake_name.down.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		name, half := m[2], m[3]
		if v == 0 {
			return nil, fmt.Errorf("migration file %s: versions start at 001", e.Name())
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		if strings.Contains(strings.ToUpper(string(body)), "CONCURRENTLY") {
			return nil, fmt.Errorf("migration file %s: CONCURRENTLY cannot run inside a migration's transaction", e.Name())
		}
		mig := byVersion[v]
		if mig == nil {
			mig = &Migration{Version: v, Name: name}
			byVersion[v] = mig
			seen[v] = map[string]bool{}
		}
		if mig.Name != name {
			return nil, fmt.Errorf("duplicate migration version %03d: %03d_%s and %03d_%s", v, v, mig.Name, v, name)
		}
		if seen[v][half] {
			return nil, fmt.Errorf("duplicate migration file %s", e.Name())
		}
		seen[v][half] = true
		if half == "up" {
			mig.Up = string(body)
		} else {
			mig.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration versions have a gap: %03d is missing", i+1)
		}
		for _, half := range []string{"up", "down"} {
			if !seen[m.Version][half] {
				return nil, fmt.Errorf("migration %s is missing its %s half (%s.%s.sql)", m.ID(), half, m.ID(), half)
			}
		}
	}
	return out, nil
}
