// Command gofmt formats the Go files of the workspace, like gofmt -w. It
// is an example of a cordon tool that writes, compiled to WebAssembly with
// the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -o tool.wasm .
//
// It finds and reads files through WASI, and replaces each changed file
// through cordon's host module (cordon/write: an atomic replace through
// the workspace guard, never through a hard link), logging each one with
// cordon/log. Its declaration asks for fs.read:workspace,
// fs.write:workspace, wasm.import:cordon/write and wasm.import:cordon/log.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/cordon-run/cordon/examples/internal/cordon"
)

type input struct {
	Paths  []string `json:"paths"`   // files or directories; default the whole workspace
	DryRun bool     `json:"dry_run"` // list what would change, change nothing
}

type output struct {
	Formatted []string          `json:"formatted"`
	Unchanged int               `json:"unchanged"`
	Errors    map[string]string `json:"errors,omitempty"`
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "gofmt: reading the input:", err)
		os.Exit(1)
	}
	if len(in.Paths) == 0 {
		in.Paths = []string{"."}
	}
	out := output{Formatted: []string{}, Errors: map[string]string{}}
	for _, root := range in.Paths {
		root = path.Clean(strings.TrimPrefix(root, "/"))
		fs.WalkDir(os.DirFS("."), root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				out.Errors[p] = err.Error()
				return nil
			}
			if d.IsDir() && (d.Name() == ".git" || d.Name() == "vendor" || d.Name() == "testdata") && p != root {
				return fs.SkipDir
			}
			if !d.Type().IsRegular() || !strings.HasSuffix(p, ".go") {
				return nil
			}
			src, err := os.ReadFile(p)
			if err != nil {
				out.Errors[p] = err.Error()
				return nil
			}
			res, err := format.Source(src)
			if err != nil {
				out.Errors[p] = err.Error()
				return nil
			}
			if bytes.Equal(src, res) {
				out.Unchanged++
				return nil
			}
			if !in.DryRun {
				if err := cordon.WriteFile(p, res); err != nil {
					out.Errors[p] = err.Error()
					return nil
				}
				cordon.Log(cordon.Info, "formatted "+p)
			}
			out.Formatted = append(out.Formatted, p)
			return nil
		})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(out)
	if len(out.Errors) > 0 {
		os.Exit(1)
	}
}
