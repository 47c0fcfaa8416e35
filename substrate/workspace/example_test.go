package workspace_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordon-run/cordon/substrate/workspace"
)

func Example() {
	dir, _ := os.MkdirTemp("", "ws")
	defer os.RemoveAll(dir)
	os.Mkdir(filepath.Join(dir, ".efferent"), 0o700)
	os.Symlink("/etc/passwd", filepath.Join(dir, "passwd"))

	ws, err := workspace.Open(dir)
	if err != nil {
		panic(err)
	}
	defer ws.Close()

	// Writes are atomic and create missing parents inside the workspace.
	if err := ws.WriteFile("notes/todo.txt", []byte("write the tests\n")); err != nil {
		panic(err)
	}
	if err := ws.Edit("notes/todo.txt", "write", "run"); err != nil {
		panic(err)
	}
	data, _ := ws.ReadFile("notes/todo.txt")
	fmt.Print(string(data))

	// Escapes are refused with a typed error that names the boundary.
	for _, p := range []string{"../outside.txt", "passwd", ".efferent/key"} {
		_, err := ws.ReadFile(p)
		fmt.Println(errors.Is(err, workspace.ErrOutsideWorkspace), errors.Is(err, workspace.ErrHarnessState))
	}
	// Output:
	// run the tests
	// true false
	// true false
	// false true
}
