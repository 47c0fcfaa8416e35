//go:build wasip1

// Command hello is the smallest Go program worth timing: the process
// benchmark's minimal Go module (GOOS=wasip1 GOARCH=wasm).
package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
