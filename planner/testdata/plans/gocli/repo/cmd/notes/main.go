package main

import (
	"os"

	"example.com/notes/internal/cli"
)

func main() {
	if cli.Run(os.Args[1:], nil) != nil {
		os.Exit(1)
	}
}
