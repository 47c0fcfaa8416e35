package roots

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Entry is one path of a tree as a manifest records it.
type Entry struct {
	Path   string `json:"path"`             // slash-separated, relative to the tree
	Type   string `json:"type"`             // file, dir, symlink, other
	Mode   uint32 `json:"mode"`             // permission bits (0o777 and setuid, setgid, sticky)
	Size   int64  `json:"size,omitempty"`   // files
	Digest string `json:"digest,omitempty"` // files: "sha256:..." of the content
	Target string `json:"target,omitempty"` // symlinks: the link's text, never followed
}

// Executable reports whether the entry is a file someone may execute.
func (e Entry) Executable() bool { return e.Type == "file" && e.Mode&0o111 != 0 }

// same reports whether two entries record the same content, type and mode.
func (e Entry) same(o Entry) bool {
	return e.Type == o.Type && e.Mode == o.Mode && e.Digest == o.Digest && e.Target == o.Target && (e.Type != "file" || e.Size == o.Size)
}

// Manifest is a tree's entries, sorted by path.
type Manifest []Entry

// Digest is "sha256:" and the hex SHA-256 of the manifest's JSON.
func (m Manifest) Digest() string {
	data, _ := json.Marshal(m)
	return digestOf(data)
}

// index maps each path to its entry.
func (m Manifest) index() map[string]Entry {
	idx := make(map[string]Entry, len(m))
	for _, e := range m {
		idx[e.Path] = e
	}
	return idx
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// skipFunc says whether a path (and, for a directory, all below it) is
// left out of a manifest.
type skipFunc func(rel string, isDir bool) bool

// isBinary reports whether data looks binary as git decides it: a NUL
// byte in its first 8000 bytes.
func isBinary(data []byte) bool {
	if len(data) > 8000 {
		data = data[:8000]
	}
	return bytes.IndexByte(data, 0) >= 0
}
