package main

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/cordon-run/cordon/substrate/workspace"
)

func init() {
	register(command{name: "fs", summary: "read|write|list|stat|edit PATH: the direct file tools", usage: fsUsage, run: runFS, front: true, subs: subsOf("read", "write", "list", "stat", "edit")})
}

const fsUsage = `usage: cordon fs read|write|list|stat|edit [-w DIR] [--json] PATH
  read PATH                     print a regular file (at most 16 MiB)
  write PATH                    replace or create PATH with stdin, atomically
  edit PATH --old TEXT --new TEXT
                                replace the one occurrence of TEXT (--new '' deletes it)
  list PATH                     list a directory
  stat PATH                     type, size, mode, mtime`

// afterWrite moves out of git's way a repository that a write entered in
// the index as a submodule (see harness.Protected.Quarantine), and says
// so; it returns the notes.
func (e *env) afterWrite(ws *workspace.Workspace) []string {
	notes := []string{}
	p := ws.Found()
	if p == nil {
		return notes // no change was made
	}
	notes = append(notes, p.QuarantineNotes()...)
	if !e.json {
		for _, n := range notes {
			fmt.Fprintf(e.stderr, "cordon: %s\n", n)
		}
	}
	return notes
}

func runFS(e *env, args []string) int {
	if len(args) == 0 {
		return e.usageError("fs needs an operation\n" + fsUsage)
	}
	op, args := args[0], args[1:]
	switch op {
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, fsUsage)
		return exitOK
	case "read", "write", "list", "stat", "edit":
	default:
		return e.usageError(fmt.Sprintf("unknown fs operation %q\n%s", op, fsUsage))
	}
	fs := e.flags("fs " + op)
	var old, new string
	if op == "edit" {
		fs.StringVar(&old, "old", "", "the text to replace (must occur exactly once)")
		fs.StringVar(&new, "new", "", "the replacement")
	}
	if code := e.parse(fs, args, fsUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageError(fmt.Sprintf("fs %s needs exactly one PATH\n%s", op, fsUsage))
	}
	if op == "edit" && (!fs.Changed("old") || !fs.Changed("new")) {
		return e.usageError("fs edit needs --old TEXT and --new TEXT (--new '' deletes the text, explicitly)\n" + fsUsage)
	}
	name := fs.Arg(0)
	open := e.openWorkspace
	if op == "write" || op == "edit" {
		open = e.openWorkspaceToWrite
	}
	ws, err := open()
	if err != nil {
		return e.fail(err)
	}
	defer ws.Close()

	switch op {
	case "read":
		data, err := ws.ReadFile(name)
		if err != nil {
			return e.fail(err)
		}
		if !e.json {
			e.stdout.Write(data)
			return exitOK
		}
		out := struct {
			Path     string `json:"path"`
			Size     int    `json:"size"`
			Content  []byte `json:"content,omitempty"`
			Text     string `json:"text"`
			Encoding string `json:"encoding"`
		}{Path: name, Size: len(data), Encoding: "utf-8"}
		if utf8.Valid(data) {
			out.Text = string(data)
		} else {
			out.Content, out.Encoding = data, "base64"
		}
		e.printJSON(out)
	case "write":
		data, err := readInput(e.stdin, workspace.DefaultMaxFileSize)
		if err != nil {
			return e.fail(err)
		}
		if err := ws.WriteFile(name, data); err != nil {
			return e.fail(err)
		}
		notes := e.afterWrite(ws)
		if e.json {
			e.printJSON(map[string]any{"path": name, "bytes": len(data), "notes": notes})
		}
	case "edit":
		if err := ws.Edit(name, old, new); err != nil {
			return e.fail(err)
		}
		notes := e.afterWrite(ws)
		if e.json {
			e.printJSON(map[string]any{"path": name, "replaced": 1, "notes": notes})
		}
	case "list":
		entries, truncated, err := ws.List(name)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			out := make([]entryJSON, 0, len(entries))
			for _, en := range entries {
				out = append(out, entryOf(en))
			}
			e.printJSON(withBytes(map[string]any{"path": name, "entries": out, "truncated": truncated}, "path", name))
			return exitOK
		}
		for _, en := range entries {
			suffix := ""
			if en.Type == "dir" {
				suffix = "/"
			}
			fmt.Fprintf(e.stdout, "%s%s\n", shown(en.Name), suffix)
		}
		if truncated {
			fmt.Fprintf(e.stderr, "cordon: listing of %q truncated\n", name)
		}
	case "stat":
		en, err := ws.Stat(name)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(withBytes(withBytes(map[string]any{"path": name, "name": en.Name, "type": en.Type, "size": en.Size,
				"mode": fmt.Sprintf("%#o", uint32(en.Mode.Perm())), "mtime": en.ModTime.Format(time.RFC3339Nano)}, "path", name), "name", en.Name))
			return exitOK
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%v\t%s\t%s\n", en.Type, en.Size, en.Mode.Perm(), en.ModTime.Format(time.RFC3339), name)
	}
	return exitOK
}

// entryJSON is a listed entry in --json output. A name that is not UTF-8
// cannot be a JSON string: "name" then shows it with U+FFFD for each bad
// byte, and "name_bytes" holds its bytes (base64), which name the entry
// when given back as a path argument.
type entryJSON struct {
	Name      string `json:"name"`
	NameBytes []byte `json:"name_bytes,omitempty"`
	Type      string `json:"type"`
	Size      int64  `json:"size"`
	ModTime   string `json:"mtime"`
}

func entryOf(en workspace.Entry) entryJSON {
	j := entryJSON{Name: en.Name, Type: en.Type, Size: en.Size, ModTime: en.ModTime.Format(time.RFC3339Nano)}
	if !utf8.ValidString(en.Name) {
		j.NameBytes = []byte(en.Name)
	}
	return j
}

// withBytes adds key+"_bytes" (base64 of value's bytes) to m when value is
// not UTF-8, as entryJSON does for names.
func withBytes(m map[string]any, key, value string) map[string]any {
	if !utf8.ValidString(value) {
		m[key+"_bytes"] = []byte(value)
	}
	return m
}
