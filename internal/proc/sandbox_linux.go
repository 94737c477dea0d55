package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// helperSpec is what the parent tells the sandbox helper, in helperEnv.
type helperSpec struct {
	Writable []string `json:"writable"`
	AddOnly  []string `json:"add_only,omitempty"`
	// MountProc: the helper is PID 1 of a new PID namespace and mounts a
	// /proc of its own.
	MountProc bool `json:"mount_proc"`
	// Loopback: the helper is in a new network namespace and brings up
	// its loopback.
	Loopback bool `json:"loopback"`
	// Landlock is the ABI version to confine writes with; 0 means none.
	Landlock int `json:"landlock"`
	// Probe: set everything up, report on stdout, and exit instead of
	// running a command.
	Probe bool `json:"probe,omitempty"`
}

func init() {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		return
	}
	// The sandbox is set up on this thread, and the command is executed
	// from it: Landlock confines the thread that asks, and execve passes
	// that thread's confinement to the command.
	runtime.LockOSThread()
	os.Unsetenv(helperEnv)
	if err := helperMain(spec, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s %v\n", helperPrefix, err)
		os.Exit(helperFailed)
	}
	os.Exit(0)
}

// helperMain sets the sandbox up and executes args; it returns only on
// failure, or after a probe.
func helperMain(raw string, args []string) error {
	var spec helperSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return fmt.Errorf("bad spec: %w", err)
	}
	if spec.MountProc {
		// Mounts made here must not reach the host's mount namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make mounts private: %w", err)
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
	}
	if spec.Loopback {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bring up loopback: %w", err)
		}
	}
	if spec.Landlock > 0 {
		if err := landlockRestrict(spec.Landlock, spec.Writable, spec.AddOnly); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if spec.Probe {
		return nil
	}
	if len(args) == 0 {
		return errors.New("no command")
	}
	path, err := lookPath(args[0], os.Environ())
	if err != nil {
		return err
	}
	err = syscall.Exec(path, args, os.Environ())
	return fmt.Errorf("exec %s: %w", args[0], err)
}

// loopbackUp sets the IFF_UP flag of "lo", so that servers and clients
// inside the namespace can talk to each other.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// landlockWrites returns the write rights an ABI version knows.
func landlockWrites(abi int) uint64 {
	rights := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		rights |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		rights |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return rights
}

// landlockAdds are the rights beneath an add-only folder: new files and
// folders, and writing them. Git writes an object as a temporary file
// that it links to its name, in the same folder, which needs no more.
const landlockAdds = unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_WRITE_FILE

// landlockRestrict confines this thread's writes to the writable paths,
// and to adding files beneath the add-only ones. Reading and executing
// stay allowed everywhere. From ABI 6 on, signals and abstract unix
// sockets are scoped to the sandbox too.
func landlockRestrict(abi int, writable, addOnly []string) error {
	writes := landlockWrites(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: writes}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("create ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	type rule struct {
		path   string
		access uint64
	}
	var rules []rule
	for _, p := range writable {
		rules = append(rules, rule{p, writes})
	}
	for _, p := range addOnly {
		rules = append(rules, rule{p, landlockAdds})
	}
	for _, r := range rules {
		p := r.path
		pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone since the parent looked
		}
		access := r.access
		var st unix.Stat_t
		if unix.Fstat(pfd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			// Rules on a file take only the rights that apply to files.
			access &= unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		unix.Close(pfd)
		if errno != 0 {
			return fmt.Errorf("allow writes beneath %s: %w", p, errno)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("restrict: %w", errno)
	}
	return nil
}

// landlockABI returns the kernel's Landlock ABI version, or 0.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

var probed = sync.OnceValue(probe)

// Probe says what confinement works on this machine. It runs the helper
// once (the result is cached) with every feature, and again without
// namespaces when the kernel refuses them. TASKLOOM_SANDBOX_DISABLE turns
// features off as if the machine lacked them ("landlock", "namespaces",
// or "all", comma-separated), to see how taskloom degrades.
func Probe() Status { return disable(probed(), os.Getenv(disableEnv)) }

func probe() Status {
	var st Status
	abi := landlockABI()
	if abi == 0 {
		st.Missing = append(st.Missing, "the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list)")
	}
	dir, err := os.MkdirTemp("", "taskloom-probe-")
	if err != nil {
		st.Missing = append(st.Missing, "cannot make a temp dir to probe: "+err.Error())
		return st
	}
	defer os.RemoveAll(dir)
	spec := helperSpec{Writable: []string{dir}, MountProc: true, Loopback: true, Landlock: abi, Probe: true}
	if err := runProbe(spec, true); err == nil {
		st.Processes, st.Network, st.Landlock = true, true, abi
		return st
	} else {
		st.Missing = append(st.Missing, "namespaces: "+err.Error())
	}
	if abi > 0 {
		spec = helperSpec{Writable: []string{dir}, Landlock: abi, Probe: true}
		if err := runProbe(spec, false); err == nil {
			st.Landlock = abi
		} else {
			st.Missing = append(st.Missing, "landlock: "+err.Error())
		}
	}
	return st
}

func runProbe(spec helperSpec, namespaces bool) error {
	raw, _ := json.Marshal(spec)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{"taskloom-sandbox"}
	cmd.Env = []string{helperEnv + "=" + string(raw)}
	cmd.SysProcAttr = sysProcAttr(namespaces, true)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return errors.New(strings.TrimPrefix(lastLine(msg), helperPrefix+" "))
		}
		return err
	}
	return nil
}

func sysProcAttr(namespaces, isolateNet bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if !namespaces {
		return a
	}
	a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
	if isolateNet {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	// The helper is root in its user namespace, which it needs to mount
	// /proc; files it creates belong to our own user outside.
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	a.GidMappingsEnableSetgroups = false
	return a
}

// sandboxed builds the command that runs c through the helper, with what
// Probe found to work.
func sandboxed(ctx context.Context, c Cmd, env []string) (*exec.Cmd, error) {
	st := Probe()
	spec := helperSpec{Landlock: st.Landlock, MountProc: st.Processes, Loopback: st.Processes && !c.Sandbox.Network}
	existing := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			if abs, err := filepath.Abs(p); err == nil {
				if _, err := os.Stat(abs); err == nil {
					out = append(out, abs)
				}
			}
		}
		return out
	}
	spec.Writable = existing(append(slicesClone(c.Sandbox.Writable), "/dev"))
	spec.AddOnly = existing(c.Sandbox.AddOnly)
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "/proc/self/exe", c.Args...)
	cmd.Args[0] = "taskloom-sandbox"
	cmd.Env = append(withoutVar(env, helperEnv), helperEnv+"="+string(raw))
	cmd.SysProcAttr = sysProcAttr(st.Processes, !c.Sandbox.Network)
	setGroup(cmd, true)
	return cmd, nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
