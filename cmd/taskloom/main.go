// Command taskloom turns a PRODUCT.md into working, tested code.
package main

import (
	"context"
	"os"
)

func main() {
	ctx, stop := stopContext(context.Background())
	code := Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
