package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Decl is the JSON declaration of a native tool named name, running
// command (a JSON array), bringing files and asking for caps, that takes
// any object as input.
func Decl(name, command string, files []string, caps ...string) string {
	q := func(ss []string) string {
		var out []string
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%q", s))
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	d := fmt.Sprintf(`{"name": %q, "kind": "native", "command": %s, "capabilities": %s`, name, command, q(caps))
	if files != nil {
		d += `, "files": ` + q(files)
	}
	return d + `, "input_schema": {"type": "object"}}`
}

// Script is a tool's files holding one executable shell script.
func Script(name, body string) map[string]string {
	return map[string]string{name + "*": "#!/bin/sh\n" + body}
}

// WriteFiles writes files (name → content; a name ending in "*" is
// executable) into dir, creating it and their folders.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}
