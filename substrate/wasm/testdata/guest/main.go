//go:build wasip1

// Command guest is a WASI program built with the standard Go toolchain
// (GOOS=wasip1 GOARCH=wasm) that tries, on behalf of cordon's tests, what a
// model-authored tool might try. Its first argument names the attempt; it
// prints one line per operation: "op path: ok" or "op path: error".
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
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

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: guest MODE")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "read-then-write":
		data, err := os.ReadFile("in.txt")
		report("read", "in.txt", err)
		fmt.Printf("content: %q\n", data)
		report("write", "out.txt", os.WriteFile("out.txt", []byte("x"), 0o644))
		report("append", "in.txt", appendTo("in.txt"))
		report("remove", "in.txt", syscall.Unlink("in.txt"))
		report("mkdir", "d", os.Mkdir("d", 0o755))
		report("rename", "in.txt", os.Rename("in.txt", "moved.txt"))
	case "escape":
		for _, p := range []string{"../outside/secret", "link-out/secret", "link-abs/secret",
			".efferent/key", ".EFFERENT/key", "sub/../.efferent/key", "link-harness/key", "/etc/passwd", "fifo"} {
			_, err := os.ReadFile(p)
			report("read", p, err)
		}
		for _, p := range []string{"link-out/new", ".efferent/new", "link-harness/new", "hard"} {
			report("write", p, os.WriteFile(p, []byte("pwned"), 0o644))
		}
		report("mkdir", ".foundry", os.Mkdir(".foundry", 0o755))
		report("rename", "in.txt -> .efferent/key", os.Rename("in.txt", ".efferent/key"))
		report("remove", "link-out/secret", os.Remove("link-out/secret"))
		entries, err := os.ReadDir(".")
		report("list", ".", err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		fmt.Printf("names: %s\n", strings.Join(names, " "))
		wd, _ := os.Getwd()
		fmt.Printf("cwd: %s\n", wd)
	case "write":
		report("write", "sub/new.txt", os.WriteFile("sub/new.txt", []byte("made by a module\n"), 0o644))
		report("mkdir", "sub/d", os.Mkdir("sub/d", 0o755))
		report("rename", "sub/new.txt", os.Rename("sub/new.txt", "sub/d/new.txt"))
		report("remove", "in.txt", os.Remove("in.txt"))
	case "posix":
		// What standard toolchains expect of a file system, under
		// fs.write: links, times, a trailing slash, the root itself.
		fmt.Printf("args: %s\n", strings.Join(os.Args[2:], " "))
		report("symlink", "ln-in", os.Symlink("in.txt", "ln-in"))
		data, err := os.ReadFile("ln-in")
		report("read", "ln-in", err)
		fmt.Printf("through ln-in: %q\n", data)
		report("symlink", "ln-out", os.Symlink("../outside/secret", "ln-out"))
		_, err = os.ReadFile("ln-out")
		report("read", "ln-out", err)
		report("write", "ln-out", os.WriteFile("ln-out", []byte("pwned"), 0o644))
		when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		report("chtimes", "in.txt", os.Chtimes("in.txt", when, when))
		if fi, err := os.Stat("in.txt"); err == nil {
			fmt.Printf("mtime: %s\n", fi.ModTime().UTC().Format(time.RFC3339))
		}
		report("link", "in-hard", os.Link("in.txt", "in-hard"))
		report("link", ".efferent/k2", os.Link("in.txt", ".efferent/k2"))
		// in.txt has two links now: its times are no longer set.
		report("chtimes", "in-hard", os.Chtimes("in-hard", when, when))
		report("remove", "in.txt/", syscall.Unlink("in.txt/"))
		report("open", "in.txt/", openClose("in.txt/"))
		report("open", ".", openClose("."))
	case "echo":
		// Its argv and stdin, verbatim: what a declaration's args and a
		// run's input make of them.
		in, _ := io.ReadAll(os.Stdin)
		fmt.Printf("argv: %q\nstdin: %q\n", os.Args, in)
	case "hugeread":
		data, err := os.ReadFile("huge")
		report("read", "huge", err)
		fmt.Println(len(data))
	case "sleep":
		time.Sleep(time.Hour)
		fmt.Println("woke")
	case "env":
		env := os.Environ()
		sort.Strings(env)
		fmt.Println(strings.Join(env, "\n"))
	case "spin":
		for {
		}
	case "print":
		// Prints n bytes: output bounds.
		line := strings.Repeat("y", 1023) + "\n"
		for i := 0; i < 64*1024; i++ {
			os.Stdout.WriteString(line)
		}
	case "exit":
		os.Exit(3)
	case "panic":
		panic("a tool's bug")
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func appendTo(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

func openClose(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	return f.Close()
}
