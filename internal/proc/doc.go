// Package proc starts every subprocess taskloom runs: git, the verify and
// build commands, the agent's execute_command and external agent CLIs.
//
// One place owns what each of them needs and what is easy to get wrong
// when every caller does it by hand:
//   - the context and a timeout, with the whole process group (or, when
//     sandboxed, the whole PID namespace) killed when either ends;
//   - output caps that keep the head and the tail of what was printed;
//   - an environment reduced to an allowlist (ReduceEnv), with the values
//     of everything removed redacted from what the command printed
//     (Redactor);
//   - a sandbox (Policy) where the OS offers one.
//
// On Linux the sandbox re-executes the current binary as a small helper
// inside new user, mount, PID and (unless the policy allows the network)
// network namespaces. The helper mounts a fresh /proc, so the command sees
// only its own processes and not their environments; brings up loopback;
// confines writes with Landlock to the policy's writable paths; and then
// executes the command. Each feature is probed once (Probe), and only
// those that work on this machine are used; Status says which, so the CLI
// can say honestly what is enforced. Other systems get the reduced
// environment and the timeouts, without confinement.
package proc
