// Command count-lines counts the lines of workspace files that match a
// regular expression. It is an example of a cordon tool written in plain
// Go and compiled to WebAssembly with the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -o tool.wasm .
//
// It reads its input as JSON on stdin, walks the workspace through WASI
// (cordon mounts the workspace at "/" through its guard, read-only with
// fs.read:workspace), and prints one JSON object. It needs nothing but
// fs.read:workspace: the WASI functions it never calls, like
// path_unlink_file, are answered ENOTCAPABLE by cordon.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
)

type input struct {
	Pattern string `json:"pattern"` // a Go regular expression
	Glob    string `json:"glob"`    // matched against each file's name, e.g. "*.go"; default all
	Dir     string `json:"dir"`     // where to start, relative to the workspace; default "."
}

type fileCount struct {
	Path  string `json:"path"`
	Lines int    `json:"lines"`
}

type output struct {
	Pattern string      `json:"pattern"`
	Files   []fileCount `json:"files"`
	Total   int         `json:"total"`
	Scanned int         `json:"scanned"`
	Skipped []string    `json:"skipped,omitempty"` // unreadable entries
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "count-lines:", err)
		os.Exit(1)
	}
}

func run() error {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return fmt.Errorf("pattern: %w", err)
	}
	if in.Glob == "" {
		in.Glob = "*"
	}
	if _, err := path.Match(in.Glob, ""); err != nil {
		return fmt.Errorf("glob: %w", err)
	}
	if in.Dir == "" {
		in.Dir = "."
	}
	out := output{Pattern: in.Pattern, Files: []fileCount{}}
	err = fs.WalkDir(os.DirFS(in.Dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out.Skipped = append(out.Skipped, p)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if ok, _ := path.Match(in.Glob, d.Name()); !ok {
			return nil
		}
		n, err := count(path.Join(in.Dir, p), re)
		if err != nil {
			out.Skipped = append(out.Skipped, p)
			return nil
		}
		out.Scanned++
		if n > 0 {
			out.Files = append(out.Files, fileCount{Path: path.Join(in.Dir, p), Lines: n})
			out.Total += n
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(out.Files, func(i, j int) bool {
		if out.Files[i].Lines != out.Files[j].Lines {
			return out.Files[i].Lines > out.Files[j].Lines
		}
		return out.Files[i].Path < out.Files[j].Path
	})
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func count(p string, re *regexp.Regexp) (int, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for s.Scan() {
		if re.Match(s.Bytes()) {
			n++
		}
	}
	return n, s.Err()
}
