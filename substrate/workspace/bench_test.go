package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The guarded read and the atomic write side by side with the plain os
// calls on the same 4 KiB file:
//
//	go test -run '^$' -bench . -benchmem ./substrate/workspace/
//
// The guarded read should stay within 1.5x of os.ReadFile. The atomic write
// is dominated by the fsync (WithSync(true), the default); the NoSync
// variant shows the cost of the temporary file and the rename alone.
func benchSetup(b *testing.B, opts ...Option) (*Workspace, string) {
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(dir, "src", "pkg", "file.go")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	w, err := Open(dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w, p
}

func BenchmarkRead4K(b *testing.B) {
	b.Run("plain-os.ReadFile", func(b *testing.B) {
		_, p := benchSetup(b)
		for b.Loop() {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded", func(b *testing.B) {
		w, _ := benchSetup(b)
		for b.Loop() {
			if _, err := w.ReadFile("src/pkg/file.go"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkWrite4K(b *testing.B) {
	data := bytes.Repeat([]byte("y"), 4096)
	b.Run("plain-os.WriteFile", func(b *testing.B) {
		_, p := benchSetup(b)
		for b.Loop() {
			if err := os.WriteFile(p, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-os.WriteFile+fsync", func(b *testing.B) {
		_, p := benchSetup(b)
		for b.Loop() {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.Write(data)
			f.Sync()
			f.Close()
		}
	})
	b.Run("atomic-NoSync", func(b *testing.B) {
		w, _ := benchSetup(b, WithSync(false))
		for b.Loop() {
			if err := w.WriteFile("src/pkg/file.go", data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("atomic-fsync", func(b *testing.B) {
		w, _ := benchSetup(b)
		for b.Loop() {
			if err := w.WriteFile("src/pkg/file.go", data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
