// Command cordon runs model-authored tools inside a boundary it can name:
// direct file tools confined to one workspace, sandboxed native commands,
// admitted tools with granted capabilities.
//
// The command is a thin front end: it parses flags, calls one library
// function and prints the result. Exit codes and JSON field names follow the
// CLI contract (README.md): 0 success, 1 other errors, 2 usage, 3 refused
// by policy; exec and run pass the child's code through, with 124 timeout,
// 125 could not run, 126 not executable, 127 not found.
package main

import (
	"os"
)

func main() {
	os.Exit(doMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
