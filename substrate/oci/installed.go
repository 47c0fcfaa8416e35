package oci

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

var (
	installedMu sync.Mutex
	installed   = map[string]Runtime{} // PATH and state directory → the answer
)

// Installed returns the runtime [Detect] would try first — the first of
// runc, crun on path that is a trusted program — with its version, for
// the host facts receipts record. It proves nothing (no bundle runs):
// the version is `--version`'s first line, kept in the state directory
// by the file's identity (device, inode, size, mtime, ctime), so that a
// new cordon process pays a stat, not a process. false: none.
func Installed(ctx context.Context, path string, h harness.Config) (Runtime, bool) {
	installedMu.Lock()
	defer installedMu.Unlock()
	key := path + "\x00" + h.StateDir()
	if rt, ok := installed[key]; ok {
		return rt, rt.Name != ""
	}
	var rt Runtime
	for _, name := range runtimes {
		bin, err := lookPath(name, path)
		if err != nil {
			continue
		}
		if bin, err = bwrap.TrustedProgram(bin, "", h); err != nil {
			continue
		}
		rt = Runtime{Name: name, Path: bin, Version: versionOf(ctx, h.StateDir(), bin)}
		break
	}
	installed[key] = rt
	return rt, rt.Name != ""
}

// versionRecord is what the state directory keeps of a runtime's
// version: the file it was and what it printed.
type versionRecord struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	Mtime   int64  `json:"mtime"`
	Ctime   int64  `json:"ctime"`
	Version string `json:"version"`
}

func versionOf(ctx context.Context, stateDir, bin string) string {
	var st unix.Stat_t
	if unix.Stat(bin, &st) != nil {
		return ""
	}
	want := versionRecord{Path: bin, Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
	var file string
	if stateDir != "" {
		if dir, err := userdir.EnsurePath(stateDir, "facts"); err == nil {
			file = filepath.Join(dir, "oci-version-"+filepath.Base(bin)+".json")
			if f, err := os.OpenFile(file, os.O_RDONLY|unix.O_NOFOLLOW, 0); err == nil {
				var got versionRecord
				err := json.NewDecoder(io.LimitReader(f, 4<<10)).Decode(&got)
				f.Close()
				if err == nil && got.Version != "" {
					w := want
					w.Version = got.Version
					if got == w {
						return got.Version
					}
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if len(v) > 128 {
		v = v[:128]
	}
	if file != "" && v != "" {
		want.Version = v
		data, _ := json.Marshal(want)
		if tmp, err := os.CreateTemp(filepath.Dir(file), ".oci-version-*"); err == nil {
			_, err = tmp.Write(data)
			if cerr := tmp.Close(); err == nil && cerr == nil {
				err = os.Rename(tmp.Name(), file)
			}
			if err != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	return v
}
