package proc

import (
	"context"
	"errors"
	"os/exec"
	"time"
)

// ServerCommand builds, without starting it, a long-lived command that its
// caller talks to over its standard input and output (an MCP server over
// stdio): the caller takes the pipes and starts it. Everything else is as
// Run does it: the program looked up in Env's PATH, its own process group
// killed whole when ctx ends, c.Sandbox applied when set, and each line of
// its standard error, redacted, handed to c.OnLine. c.Timeout, c.Stdin and
// c.OutputLimit do not apply: a server lives as long as ctx.
func ServerCommand(ctx context.Context, c Cmd) (*exec.Cmd, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, errors.New("start server: empty command")
	}
	cmd, err := command(ctx, c)
	if err != nil {
		return nil, err
	}
	cmd.Dir = c.Dir
	// A grandchild that kept the pipes open must not hold Wait forever
	// once the server is told to stop.
	cmd.WaitDelay = 3 * time.Second
	if c.OnLine != nil {
		cmd.Stderr = &stream{c: &capture{both: newHeadTail(4096), onLine: c.OnLine, redactor: c.Redactor}, own: newHeadTail(64)}
	}
	countStart(c.Args[0])
	return cmd, nil
}
