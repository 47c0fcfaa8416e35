package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt":                "a.txt",
		"naïve файл.go":        "naïve файл.go",
		"\x1b]0;pwned\x07":     `\x1b]0;pwned\a`,
		"two\nlines":           `two\nlines`,
		"bad\xffbytes":         `bad\xffbytes`,
		"evil\u202egnp.exe":    `evil\u202egnp.exe`,
		"carriage\rreturn":     `carriage\rreturn`,
		"with \"quotes\" kept": "with \"quotes\" kept",
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestListEscapesNames: a file whose name is a terminal escape sequence
// (a tool could make one) is listed escaped, one line per entry.
func TestListEscapesNames(t *testing.T) {
	_, ws := fsWorkspace(t)
	os.WriteFile(filepath.Join(ws, "dir", "\x1b]0;pwned\x07\nforged"), nil, 0o644)
	r := cordon(t, "", "fs", "list", "-w", ws, "dir")
	if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b\x07") || r.stdout != `\x1b]0;pwned\a\nforged`+"\n" {
		t.Fatalf("fs list of an escape-sequence name: %+v", r)
	}
}

// TestEvidenceListEscapes: list reads receipts before anything verifies
// them; a planted one whose probe name is an escape sequence is listed
// escaped.
func TestEvidenceListEscapes(t *testing.T) {
	_, ws := fsWorkspace(t)
	if r := cordon(t, "", "probe", "-w", ws, "--substrate", "workspace"); r.code != 0 {
		t.Fatalf("probe: %+v", r)
	}
	files := evidenceFiles(t, ws)
	var env struct {
		PayloadType string            `json:"payloadType"`
		Payload     []byte            `json:"payload"`
		Signatures  []json.RawMessage `json:"signatures"`
	}
	data, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	env.Payload = []byte(strings.Replace(string(env.Payload), `"name":"workspace/`, `"name":"\u001b]0;pwned\u0007workspace/`, 1))
	forged, _ := json.Marshal(env)
	os.WriteFile(files[0], forged, 0o644)
	r := cordon(t, "", "evidence", "list", "-w", ws)
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") || !strings.Contains(r.stdout, `\x1b]0;pwned\a`) {
		t.Fatalf("evidence list of a planted receipt: %+v", r)
	}
}
