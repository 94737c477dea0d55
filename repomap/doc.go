// Package repomap describes a repository compactly for a planning prompt:
// its file tree, its packages (Go packages and modules, Python packages,
// npm packages) and the exported symbols of its source files (Go through
// go/parser; Python top-level def and class; TypeScript and JavaScript
// export statements), cut to fit a token budget.
//
// The files are the ones git tracks, read from the index with go-git (no
// git process), or, in a folder that is not a repository or has an empty
// index, the files found by walking it, skipping hidden folders and
// dependency folders such as node_modules and vendor.
//
// Render fits the map into a budget of tokens, as llm.EstimateTokens counts
// them, by giving up detail in steps: first every file with its symbols,
// then every file without symbols, then only the folders with their
// package and file count, and finally as many folders as fit, followed by
// a line that counts the rest. A map is never longer than its budget.
package repomap
