package proc

import (
	"os"
	"path/filepath"
	"strings"
)

// Policy confines a command.
type Policy struct {
	// Writable lists the directories (or files) the command may create,
	// change and delete things beneath; everywhere else is read-only.
	// Paths that do not exist are left out.
	Writable []string
	// AddOnly lists directories the command may add files and folders
	// beneath, and write what it added, but not delete or rename
	// anything in, nor truncate: a store of files that are only ever
	// added, such as git's objects. (Landlock cannot tell a new file from
	// one that was there: writing into an existing file stays possible.)
	AddOnly []string
	// Network lets the command reach the network (and the host's
	// loopback). Without it the command gets a loopback of its own.
	Network bool
}

// Status says which confinement works on this machine.
type Status struct {
	// Landlock is the Landlock ABI version used to confine writes; 0 when
	// writes are not confined.
	Landlock int `json:"landlock"`
	// Processes is true when the command runs in PID and mount namespaces
	// of its own, with a /proc that shows only its own processes.
	Processes bool `json:"processes"`
	// Network is true when a command without Policy.Network runs in a
	// network namespace of its own.
	Network bool `json:"network"`
	// Missing explains each feature that is not available.
	Missing []string `json:"missing,omitempty"`
}

// Complete reports whether every confinement is enforced.
func (s Status) Complete() bool { return s.Landlock > 0 && s.Processes && s.Network }

// String says in one line what is enforced.
func (s Status) String() string {
	var on, off []string
	add := func(ok bool, what string) {
		if ok {
			on = append(on, what)
		} else {
			off = append(off, what)
		}
	}
	add(s.Landlock > 0, "writes confined to the worktree (Landlock)")
	add(s.Processes, "other processes hidden (PID namespace)")
	add(s.Network, "network off (network namespace)")
	out := "sandbox: environment reduced to sandbox.env_allow"
	if len(on) > 0 {
		out += "; " + strings.Join(on, "; ")
	}
	if len(off) > 0 {
		out += "; NOT enforced: " + strings.Join(off, "; ")
		if len(s.Missing) > 0 {
			out += " (" + strings.Join(s.Missing, "; ") + ")"
		}
	}
	return out
}

// disableEnv names the variable that turns sandbox features off.
const disableEnv = "TASKLOOM_SANDBOX_DISABLE"

// disable turns off the features that list names.
func disable(st Status, list string) Status {
	for _, f := range strings.Split(list, ",") {
		switch strings.TrimSpace(f) {
		case "landlock":
			st.Landlock = 0
			st.Missing = append(st.Missing, "Landlock turned off by "+disableEnv)
		case "namespaces":
			st.Processes, st.Network = false, false
			st.Missing = append(st.Missing, "namespaces turned off by "+disableEnv)
		case "all":
			st = Status{Missing: []string{"the sandbox turned off by " + disableEnv}}
		}
	}
	return st
}

// CacheDirs returns the toolchain caches a sandboxed command may write to,
// as env (the command's environment) locates them: Go's build and module
// caches, npm's cache and pip's cache. Only existing ones are returned;
// Go's and npm's are made first when those tools are on the PATH.
func CacheDirs(env []string) []string {
	get := func(name string) string {
		v := ""
		for _, kv := range env {
			if s, ok := strings.CutPrefix(kv, name+"="); ok {
				v = s
			}
		}
		return v
	}
	home := get("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	cache := get("XDG_CACHE_HOME")
	if cache == "" && home != "" {
		cache = filepath.Join(home, ".cache")
	}
	var dirs []string
	// A toolchain makes its cache on first use, which the sandbox would
	// refuse: the caches of the toolchains on the PATH are made now.
	var create []string
	if v := get("GOCACHE"); v != "" && v != "off" {
		dirs = append(dirs, v)
	} else if cache != "" {
		dirs = append(dirs, filepath.Join(cache, "go-build"))
	}
	if _, err := lookPath("go", env); err == nil {
		create = append(create, dirs...)
	}
	if v := get("GOMODCACHE"); v != "" {
		dirs = append(dirs, v)
	} else if v := get("GOPATH"); v != "" {
		dirs = append(dirs, filepath.Join(filepath.SplitList(v)[0], "pkg", "mod"))
	} else if home != "" {
		dirs = append(dirs, filepath.Join(home, "go", "pkg", "mod"))
	}
	if home != "" {
		dirs = append(dirs, filepath.Join(home, ".npm"))
		if _, err := lookPath("npm", env); err == nil {
			create = append(create, filepath.Join(home, ".npm"))
		}
	}
	if cache != "" {
		dirs = append(dirs, filepath.Join(cache, "pip"))
	}
	for _, d := range create {
		_ = os.MkdirAll(d, 0o755)
	}
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// Exit status and stderr prefix of the sandbox helper when it could not
// set the sandbox up.
const (
	helperFailed = 125
	helperPrefix = "taskloom sandbox:"
	helperEnv    = "TASKLOOM_SANDBOX"
)
