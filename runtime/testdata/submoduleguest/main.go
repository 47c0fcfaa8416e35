//go:build wasip1

// Command submoduleguest is a WASI tool for the runtime's tests of the
// git quarantine: it makes its first change (so that the workspace's
// protected set is found then), then waits for the signal files the
// test's native runs leave, and tries to write core.fsmonitor into the
// entry of the submodule P at the moments the test wants.
package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

func report(op, path string, err error) {
	if err == nil {
		fmt.Printf("%s %s: ok\n", op, path)
		return
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		fmt.Printf("%s %s: errno %d\n", op, path, uint32(errno))
		return
	}
	fmt.Printf("%s %s: %v\n", op, path, err)
}

func wait(name string) bool {
	for range 800 {
		if _, err := os.Stat(name); err == nil {
			return true
		}
		time.Sleep(25 * time.Millisecond)
	}
	return false
}

func plant(label string) error {
	line, err := os.ReadFile("e/fsmon-line")
	if err != nil {
		return err
	}
	config, err := os.ReadFile("P/.git/config")
	if err != nil {
		return err
	}
	err = os.WriteFile("P/.git/config", append(config, line...), 0o644)
	report("plant-"+label, "P/.git/config", err)
	return err
}

func signal(name string) { os.WriteFile(name, nil, 0o644) }

func main() {
	switch os.Args[1] {
	case "stale":
		// The first change finds the set: P is out of the index then.
		report("write", "x.txt", os.WriteFile("x.txt", []byte("x"), 0o644))
		plant("early") // refused: the run R going on trusts P
		signal("e/t-first")
		if !wait("e/r-over") {
			fmt.Println("no r-over")
			return
		}
		// R put P back and ended: no run going on trusts P, P is in the
		// index, and the set found at the first change did not name it.
		plant("late")
		signal("e/t-planted")
		if !wait("e/w-ready") {
			fmt.Println("no w-ready")
			return
		}
		// W took P out of the index: this tool's quarantine at its end
		// finds nothing new in it.
	}
}
