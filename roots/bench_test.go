package roots_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/roots"
)

// moduleRoot is this repository's top directory.
func moduleRoot(b *testing.B) string {
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
	}
	b.Skip("not in the source tree")
	return ""
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func run(b *testing.B, dir string, name string, args ...string) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v %s", name, args, err, out)
	}
}

// BenchmarkRoots makes roots of a clone of this repository (copy and
// worktree modes) side by side with cp -a and git worktree add, and
// diffs a root after a one-line change; it reports medians and ratios.
func BenchmarkRoots(b *testing.B) {
	src := moduleRoot(b)
	origin := filepath.Join(b.TempDir(), "origin")
	run(b, "/", "git", "clone", "-q", "--no-hardlinks", src, origin)
	h := testenv.Harness(b)
	rs, err := roots.Open(h)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	scratch := b.TempDir()
	var copyT, cpT, wtT, gitT, diffT []time.Duration
	b.ResetTimer()
	for i := range b.N {
		t := time.Now()
		r, err := rs.Create(ctx, roots.CreateOptions{From: origin})
		if err != nil {
			b.Fatal(err)
		}
		copyT = append(copyT, time.Since(t))

		dst := filepath.Join(scratch, "cp", time.Now().Format("150405.000000000"))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		t = time.Now()
		run(b, "/", "cp", "-a", origin, dst)
		cpT = append(cpT, time.Since(t))
		os.RemoveAll(dst)

		os.WriteFile(filepath.Join(r.Path, "README.md"), []byte("one line changed\n"), 0o644)
		t = time.Now()
		if _, err := rs.Diff(r); err != nil {
			b.Fatal(err)
		}
		diffT = append(diffT, time.Since(t))
		rs.Discard(ctx, r)

		t = time.Now()
		w, err := rs.Create(ctx, roots.CreateOptions{From: origin, Mode: roots.ModeWorktree})
		if err != nil {
			b.Fatal(err)
		}
		wtT = append(wtT, time.Since(t))
		rs.Discard(ctx, w)

		wt := filepath.Join(scratch, "wt", time.Now().Format("150405.000000000"))
		t = time.Now()
		run(b, origin, "git", "worktree", "add", "-q", "-b", "bench-"+filepath.Base(wt)+"-"+string(rune('a'+i%26)), wt, "HEAD")
		gitT = append(gitT, time.Since(t))
		run(b, origin, "git", "worktree", "remove", "--force", wt)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(median(copyT)), "copy-ms")
	b.ReportMetric(ms(median(cpT)), "cp-a-ms")
	b.ReportMetric(float64(median(copyT))/float64(median(cpT)), "copy/cp-a")
	b.ReportMetric(ms(median(wtT)), "worktree-ms")
	b.ReportMetric(ms(median(gitT)), "git-worktree-ms")
	b.ReportMetric(float64(median(wtT))/float64(median(gitT)), "worktree/git-worktree")
	b.ReportMetric(ms(median(diffT)), "diff-ms")
	b.ReportMetric(0, "ns/op")
}
