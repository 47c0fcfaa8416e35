package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
)

// buildCordon builds cordon for a benchmark as README.md builds it: static
// (CGO_ENABLED=0), which starts faster, the front end (the tag
// cordon_front) as cordon and the full binary beside it as cordon-full.
// It returns the front end.
func buildCordon(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for _, bin := range []struct{ name, tags string }{{"cordon", "cordon_front"}, {fullName, ""}} {
		linked := filepath.Join(dir, bin.name+".linked")
		cmd := exec.Command("go", "build", "-tags", bin.tags, "-o", linked, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Skipf("cannot build %s: %v\n%s", bin.name, err, out)
		}
		installed(b, linked, filepath.Join(dir, bin.name))
	}
	return filepath.Join(dir, "cordon")
}

// installed copies the program linked to bin, as an installer copies it
// into place, and returns bin. A binary as Go's linker left it starts
// slower while the linker's pages stay in the page cache: `cordon
// --version` 3.03 vs 2.75 ms for two builds and their copies, 800 runs
// shuffled. The benchmarks measure cordon as installed, as bwrap is.
func installed(b *testing.B, linked, bin string) string {
	b.Helper()
	data, err := os.ReadFile(linked)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		b.Fatal(err)
	}
	return bin
}

// benchWorkspace returns a workspace holding a git repository, and points
// the harness configuration of this process and of the cordon processes
// it starts at temporary directories.
func benchWorkspace(b *testing.B) string {
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	return ws
}

// benchHarness isolates the harness configuration for a benchmark.
func benchHarness(b *testing.B) harness.Config {
	h := testenv.Harness(b)
	b.Setenv(harness.EnvStateDir, h.StateDir())
	b.Setenv(harness.EnvCacheDir, h.CacheDir())
	return h
}

// rawBwrap prepares the sandbox cordon exec makes in ws and returns the
// raw bwrap options and environment for `bwrap OPTIONS -- true`, and the
// sandbox, whose placeholders must stay while the options are used.
func rawBwrap(b *testing.B, h harness.Config, ws string) ([]string, []string, *bwrap.Sandbox) {
	sb, err := bwrap.NewPolicy(ws, h).Prepare(os.Environ())
	if err != nil {
		b.Fatal(err)
	}
	return append(sb.Options(), "--", "true"), sb.Env(), sb
}

// seccompArgs returns the seccomp program of the sandbox cordon exec makes
// in ws, and the raw bwrap arguments rawArgs with `--seccomp 3` added
// before "--", for timeFiltered.
func seccompArgs(b *testing.B, h harness.Config, ws string, rawArgs []string) ([]byte, []string) {
	filter, err := seccomp.Marshal(bwrap.NewPolicy(ws, h).Seccomp())
	if err != nil {
		b.Fatal(err)
	}
	return filter, append(append(slices.Clone(rawArgs[:len(rawArgs)-2]), "--seccomp", "3"), rawArgs[len(rawArgs)-2:]...)
}

// timeFiltered times raw bwrap with args and env, handed the seccomp
// program filter on descriptor 3 (written whole into a pipe first, as
// cordon hands it).
func timeFiltered(b *testing.B, bin string, args, env []string, filter []byte) time.Duration {
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	pw.Write(filter)
	pw.Close()
	r := exec.Command(bin, args...)
	r.Env, r.ExtraFiles = env, []*os.File{pr}
	return timeRun(b, r)
}

// sideArgs returns the raw bwrap arguments rawArgs with every side
// channel cordon gives bwrap added before "--", on the descriptors
// timeSide hands them: the same argv as a run's, its options read from a
// descriptor (--args) as a run's are.
func sideArgs(rawArgs []string) (opts []byte, argv []string) {
	side := append(slices.Clone(rawArgs[:len(rawArgs)-2]),
		"--block-fd", "3", "--sync-fd", "7", "--json-status-fd", "4", "--seccomp", "6")
	for _, a := range side {
		opts = append(append(opts, a...), 0)
	}
	return opts, append([]string{"--args", "5"}, rawArgs[len(rawArgs)-2:]...)
}

// timeSide times raw bwrap given the arguments of sideArgs: its options on
// a pipe (--args), its block descriptor (--block-fd) holding its byte
// already (no round trip: the least a caller of these flags can do), the
// writing end of that pipe as its --sync-fd, its status (--json-status-fd)
// read to the end, the seccomp program on a pipe — what the side channels
// cost bwrap itself, without cordon's work around them.
func timeSide(b *testing.B, bin string, opts []byte, args, env []string, filter []byte) time.Duration {
	pipe := func(data []byte) (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		if data != nil {
			if _, err := w.Write(data); err != nil {
				b.Fatal(err)
			}
		}
		return r, w
	}
	start := time.Now()
	blockR, blockW := pipe([]byte{1})
	statusR, statusW := pipe(nil)
	argsR, argsW := pipe(nil)
	filterR, filterW := pipe(filter)
	filterW.Close()
	r := exec.Command(bin, args...)
	r.Env = env
	r.ExtraFiles = []*os.File{blockR, statusW, argsR, filterR, blockW} // 3 block, 4 status, 5 args, 6 seccomp, 7 sync
	if err := r.Start(); err != nil {
		b.Fatal(err)
	}
	for _, f := range []*os.File{blockR, statusW, argsR, filterR, blockW} {
		f.Close()
	}
	if _, err := argsW.Write(opts); err != nil {
		b.Fatal(err)
	}
	argsW.Close()
	status, err := io.ReadAll(statusR)
	statusR.Close()
	if err != nil || !bytes.Contains(status, []byte(`"exit-code": 0`)) {
		b.Fatalf("bwrap's status: %q %v", status, err)
	}
	if err := r.Wait(); err != nil {
		b.Fatalf("%v: %v", r.Args, err)
	}
	return time.Since(start)
}

func timeRun(b *testing.B, cmd *exec.Cmd) time.Duration {
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	return time.Since(start)
}

// pairedRatio returns the median over the loop's turns of a[i]/b[i].
func pairedRatio(a, b []time.Duration) float64 {
	r := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		r = append(r, float64(a[i])/float64(b[i]))
	}
	if len(r) == 0 {
		return 0
	}
	sort.Float64s(r)
	return r[len(r)/2]
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkExecTrue runs, interleaved in one loop, `cordon exec -- true`,
// the raw bwrap invocation with the same options (`bwrap OPTIONS -- true`,
// built by the same code), the same with the run's seccomp program too
// (`--seccomp FD`: the same sandbox, without cordon's side channels), the
// same with every flag a run gives bwrap (its argv: the seccomp program
// and the side channels, timeSide), runtime.Run in process, and the bare
// `true`, and reports the medians and their ratios.
func BenchmarkExecTrue(b *testing.B) {
	needBwrap(b)
	cordon := buildCordon(b)
	h := benchHarness(b)
	ws := benchWorkspace(b)
	bin, _ := bwrap.Find(os.Getenv("PATH"))
	rawArgs, rawEnv, sb := rawBwrap(b, h, ws)
	defer sb.Close()
	filter, withFilter := seccompArgs(b, h, ws, rawArgs)
	sideOpts, withSide := sideArgs(rawArgs)
	trueBin, _ := exec.LookPath("true")
	a, err := admission.New(admission.Config{Workspace: ws, Harness: h})
	if err != nil {
		b.Fatal(err)
	}
	set := capabilities.MustParseSet("fs.read:workspace", "fs.write:workspace", "net:none", "time:2m", "output:1MiB", "tmp:512MiB")
	rt := runtime.New(runtime.Config{})
	defer rt.Close()

	var cli, raw, rawSeccomp, rawSide, lib, bare, prep []time.Duration
	b.ResetTimer()
	for range b.N {
		c := exec.Command(cordon, "exec", "--", "true")
		c.Dir = ws
		cli = append(cli, timeRun(b, c))

		r := exec.Command(bin, rawArgs...)
		r.Env = rawEnv
		raw = append(raw, timeRun(b, r))

		rawSeccomp = append(rawSeccomp, timeFiltered(b, bin, withFilter, rawEnv, filter))

		rawSide = append(rawSide, timeSide(b, bin, sideOpts, withSide, rawEnv, filter))

		start := time.Now()
		p, err := a.PrepareCommand(context.Background(), admission.Command{Argv: []string{"true"}, Capabilities: set})
		if err != nil {
			b.Fatal(err)
		}
		prep = append(prep, time.Since(start))
		res, err := rt.Run(context.Background(), p)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("runtime.Run: %v %v", res, err)
		}
		lib = append(lib, time.Since(start))

		bare = append(bare, timeRun(b, exec.Command(trueBin)))
	}
	b.StopTimer()
	mc, mr, ms, mf, ml, mb := median(cli), median(raw), median(rawSeccomp), median(rawSide), median(lib), median(bare)
	b.ReportMetric(float64(mc.Microseconds()), "cordon-µs")
	b.ReportMetric(float64(mr.Microseconds()), "bwrap-µs")
	b.ReportMetric(float64(ms.Microseconds()), "bwrap-seccomp-µs")
	b.ReportMetric(float64(mf.Microseconds()), "bwrap-argv-µs")
	b.ReportMetric(float64(ml.Microseconds()), "runtime.Run-µs")
	b.ReportMetric(float64(mb.Microseconds()), "bare-µs")
	b.ReportMetric(float64(mc)/float64(mr), "cordon/bwrap")
	b.ReportMetric(float64(ml)/float64(mr), "runtime.Run/bwrap")
	b.ReportMetric(float64(ml)/float64(ms), "runtime.Run/bwrap-seccomp")
	b.ReportMetric(float64(ml)/float64(mf), "runtime.Run/bwrap-argv")
	b.ReportMetric(float64(mr)/float64(mb), "bwrap/bare")
	// The same ratios turn by turn (each command against the raw bwrap of
	// its own turn of the loop), their median: what drifts between turns —
	// this host's load, bwrap's own time, which varies by milliseconds —
	// drops out of each ratio.
	b.ReportMetric(pairedRatio(lib, raw), "runtime.Run/bwrap-paired")
	b.ReportMetric(pairedRatio(cli, raw), "cordon/bwrap-paired")
	b.ReportMetric(float64(median(prep).Microseconds()), "prep-µs")
	b.ReportMetric(0, "ns/op") // the per-op time mixes four commands; the medians above are the figures
}

// BenchmarkPooledRun runs `/bin/sh -c true` through runtime.Run with a
// pool of sandboxes made ahead (as cordon mcp does), side by side with a
// fresh raw bwrap of the same options running the same command, and with
// runtime.Run without a pool. Each pooled call waits for the pool to have
// refilled first: the figure is a call at one concurrent call, the pool
// warm.
func BenchmarkPooledRun(b *testing.B) {
	needBwrap(b)
	h := benchHarness(b)
	ws := benchWorkspace(b)
	bin, _ := bwrap.Find(os.Getenv("PATH"))
	rawArgs, rawEnv, sb := rawBwrap(b, h, ws)
	defer sb.Close()
	rawSh := append(slices.Clone(rawArgs[:len(rawArgs)-1]), "/bin/sh", "-c", "true")
	a, err := admission.New(admission.Config{Workspace: ws, Harness: h})
	if err != nil {
		b.Fatal(err)
	}
	set := capabilities.MustParseSet("fs.read:workspace", "fs.write:workspace", "net:none", "time:2m", "output:256KiB")
	prepare := func() *admission.Prepared {
		p, err := a.PrepareCommand(context.Background(), admission.Command{Argv: []string{"/bin/sh", "-c", "true"}, Capabilities: set})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	pooled := runtime.New(runtime.Config{Pool: 2})
	defer pooled.Close()
	if err := pooled.Warm(prepare()); err != nil {
		b.Fatal(err)
	}
	fresh := runtime.New(runtime.Config{})
	defer fresh.Close()
	var pool, raw, rawTrue, unpooled []time.Duration
	b.ResetTimer()
	for range b.N {
		for i := 0; pooled.PoolStats().Ready < 2 && i < 200; i++ {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		res, err := pooled.Run(context.Background(), prepare())
		if err != nil || res.ExitCode != 0 || !res.Pooled {
			b.Fatalf("pooled runtime.Run: %v %v %+v", res, err, pooled.PoolStats())
		}
		pool = append(pool, time.Since(start))
		for i := 0; pooled.PoolStats().Ready < 2 && i < 200; i++ {
			time.Sleep(time.Millisecond)
		}

		r := exec.Command(bin, rawSh...)
		r.Env = rawEnv
		raw = append(raw, timeRun(b, r))
		r = exec.Command(bin, rawArgs...)
		r.Env = rawEnv
		rawTrue = append(rawTrue, timeRun(b, r))

		start = time.Now()
		res, err = fresh.Run(context.Background(), prepare())
		if err != nil || res.ExitCode != 0 || res.Pooled {
			b.Fatalf("runtime.Run: %v %v", res, err)
		}
		unpooled = append(unpooled, time.Since(start))
	}
	b.StopTimer()
	us := func(d []time.Duration) float64 { return float64(median(d).Microseconds()) }
	b.ReportMetric(us(pool), "pooled-µs")
	b.ReportMetric(us(raw), "bwrap-sh-µs")
	b.ReportMetric(us(rawTrue), "bwrap-true-µs")
	b.ReportMetric(us(unpooled), "unpooled-µs")
	b.ReportMetric(float64(median(pool))/float64(median(raw)), "pooled/bwrap-sh")
	b.ReportMetric(float64(median(pool))/float64(median(rawTrue)), "pooled/bwrap-true")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFlood captures a 1 GiB flood with `cordon exec` and compares
// its rate with `cat` into /dev/null, side by side; it also reports
// cordon's peak resident memory for a 64 MiB and a 1 GiB flood.
func BenchmarkFlood(b *testing.B) {
	needBwrap(b)
	cordon := buildCordon(b)
	benchHarness(b)
	ws := benchWorkspace(b)
	const gib = 1 << 30
	flood := func(n int) *exec.Cmd {
		c := exec.Command(cordon, "exec", "--", "head", "-c", fmt.Sprint(n), "/dev/zero")
		c.Dir = ws
		return c
	}
	// The peak resident memory the kernel reports for a child of this
	// benchmark is at least the benchmark's own: the child starts in its
	// parent's address space, and execve keeps the larger of the old
	// one's peak and the new one's (the figures of 02d4009 and before were
	// the benchmark's: the binaries it reads in to install them). GNU
	// time's child is forked from time itself, a small program, and its
	// peak is cordon's own.
	gnuTime, err := exec.LookPath("time")
	if err != nil {
		b.Logf("no GNU time in PATH (%v): cordon's peak memory is not measured", err)
	}
	peak := func(n int) int64 {
		out := filepath.Join(b.TempDir(), "rss")
		c := exec.Command(gnuTime, append([]string{"-f", "%M", "-o", out}, flood(n).Args...)...)
		c.Dir = ws
		timeRun(b, c)
		data, err := os.ReadFile(out)
		if err != nil {
			b.Fatal(err)
		}
		kib, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			b.Fatalf("GNU time's %%M: %q: %v", data, err)
		}
		return kib
	}
	var withCordon, withCat []time.Duration
	var rssSmall, rssLarge int64
	b.ResetTimer()
	for range b.N {
		withCordon = append(withCordon, timeRun(b, flood(gib)))
		withCat = append(withCat, timeRun(b, exec.Command("sh", "-c", fmt.Sprintf("head -c %d /dev/zero | cat > /dev/null", gib))))
		if gnuTime != "" {
			rssLarge, rssSmall = max(rssLarge, peak(gib)), max(rssSmall, peak(64<<20))
		}
	}
	b.StopTimer()
	mc, mk := median(withCordon), median(withCat)
	b.ReportMetric(float64(gib)/mc.Seconds()/(1<<20), "cordon-MiB/s")
	b.ReportMetric(float64(gib)/mk.Seconds()/(1<<20), "cat-MiB/s")
	b.ReportMetric(mk.Seconds()/mc.Seconds(), "cordon-rate/cat-rate")
	if gnuTime != "" {
		b.ReportMetric(float64(rssSmall), "peak-KiB-64MiB")
		b.ReportMetric(float64(rssLarge), "peak-KiB-1GiB")
		b.ReportMetric(float64(rssLarge)/float64(rssSmall), "peak-1GiB/peak-64MiB")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStartup measures what a new cordon process costs on the paths
// an agent calls many times per conversation: `cordon --help` (start-up
// alone), `cordon fs read`, `cordon exec -- true`, and `cordon run` of an
// admitted native tool whose command is `true`; for reference also the
// raw bwrap invocation `cordon exec` builds (in a workspace of its own)
// and the bare `true`. With
// CORDON_BASELINE naming another cordon binary (bench/startup builds one
// from a git ref), every command also runs with it, interleaved in the same
// loop, and the ratios this/baseline are reported. Each binary has its own
// workspace, where it admitted the tool itself.
func BenchmarkStartup(b *testing.B) {
	needBwrap(b)
	h := benchHarness(b)
	type binary struct {
		name, path, ws string
		times          map[string][]time.Duration
	}
	bins := []*binary{{name: "", path: buildCordon(b)}}
	if base := os.Getenv("CORDON_BASELINE"); base != "" {
		bins = append(bins, &binary{name: "base-", path: installed(b, base, filepath.Join(b.TempDir(), "cordon-base"))})
	}
	const decl = `{"name": "noop", "kind": "native", "command": ["true"], "capabilities": []}`
	for _, bin := range bins {
		bin.ws, bin.times = benchWorkspace(b), map[string][]time.Duration{}
		os.WriteFile(filepath.Join(bin.ws, "notes.txt"), []byte("a\nb\nc\n"), 0o644)
		c := exec.Command(bin.path, "admit", "-")
		c.Dir, c.Stdin = bin.ws, strings.NewReader(decl)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%s admit: %v\n%s", bin.path, err, out)
		}
	}
	paths := []struct {
		name string
		args []string
	}{
		{"help", []string{"--help"}},
		{"fs-read", []string{"fs", "read", "notes.txt"}},
		{"exec", []string{"exec", "--", "true"}},
		{"run", []string{"run", "noop"}},
	}
	bwrapBin, _ := bwrap.Find(os.Getenv("PATH"))
	// The raw bwrap runs in a workspace of its own: the placeholders its
	// options bind stay while it is in use, and a cordon run in that
	// workspace would find them made instead of making them, as a run
	// does when no other run of its workspace is going on.
	rawArgs, rawEnv, sb := rawBwrap(b, h, benchWorkspace(b))
	defer sb.Close()
	trueBin, _ := exec.LookPath("true")
	var raw, bare []time.Duration

	b.ResetTimer()
	for i := range b.N {
		order := bins
		if i%2 == 1 { // each binary first in every other round: no advantage of place
			order = slices.Clone(bins)
			slices.Reverse(order)
		}
		for _, p := range paths {
			for _, bin := range order {
				c := exec.Command(bin.path, p.args...)
				c.Dir = bin.ws
				bin.times[p.name] = append(bin.times[p.name], timeRun(b, c))
			}
		}
		r := exec.Command(bwrapBin, rawArgs...)
		r.Env = rawEnv
		raw = append(raw, timeRun(b, r))
		bare = append(bare, timeRun(b, exec.Command(trueBin)))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mr := median(raw)
	b.ReportMetric(ms(median(bare)), "bare-true-ms")
	b.ReportMetric(ms(mr), "raw-bwrap-ms")
	for _, p := range paths {
		for _, bin := range bins {
			b.ReportMetric(ms(median(bin.times[p.name])), bin.name+p.name+"-ms")
		}
		if len(bins) == 2 {
			b.ReportMetric(float64(median(bins[0].times[p.name]))/float64(median(bins[1].times[p.name])), p.name+"-this/base")
		}
	}
	for _, bin := range bins {
		b.ReportMetric(float64(median(bin.times["exec"]))/float64(mr), bin.name+"exec/raw-bwrap")
	}
	b.ReportMetric(0, "ns/op") // the per-op time mixes every command; the medians above are the figures
}

// BenchmarkSubstrates runs `true`, interleaved in one loop: bare; through
// `cordon exec --substrate landlock` and the landlock substrate's
// runtime.Run in process; through `cordon exec` on bwrap; and as the raw
// bwrap invocation cordon builds, without and with the seccomp filter
// (`--seccomp FD`), whose difference is what the filter costs a run.
func BenchmarkSubstrates(b *testing.B) {
	needBwrap(b)
	if err := landlock.Available(); err != nil {
		b.Skip(err)
	}
	cordon := buildCordon(b)
	h := benchHarness(b)
	ws := benchWorkspace(b)
	bin, _ := bwrap.Find(os.Getenv("PATH"))
	rawArgs, rawEnv, sb := rawBwrap(b, h, ws)
	defer sb.Close()
	filter, withFilter := seccompArgs(b, h, ws, rawArgs)
	trueBin, _ := exec.LookPath("true")
	a, err := admission.New(admission.Config{Workspace: ws, Harness: h})
	if err != nil {
		b.Fatal(err)
	}
	set := capabilities.MustParseSet("fs.read:workspace", "fs.write:workspace", "net:none", "time:2m", "output:1MiB")
	rt := runtime.New(runtime.Config{})
	defer rt.Close()

	var bare, llCLI, llLib, bwCLI, raw, rawSeccomp []time.Duration
	b.ResetTimer()
	for range b.N {
		bare = append(bare, timeRun(b, exec.Command(trueBin)))

		c := exec.Command(cordon, "exec", "--substrate", "landlock", "--", "true")
		c.Dir = ws
		llCLI = append(llCLI, timeRun(b, c))

		start := time.Now()
		p, err := a.PrepareCommand(context.Background(), admission.Command{Argv: []string{"true"}, Capabilities: set, Substrate: landlock.Name})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := rt.Run(context.Background(), p); err != nil || res.ExitCode != 0 {
			b.Fatalf("runtime.Run on landlock: %v %v", res, err)
		}
		llLib = append(llLib, time.Since(start))

		c = exec.Command(cordon, "exec", "--", "true")
		c.Dir = ws
		bwCLI = append(bwCLI, timeRun(b, c))

		r := exec.Command(bin, rawArgs...)
		r.Env = rawEnv
		raw = append(raw, timeRun(b, r))

		rawSeccomp = append(rawSeccomp, timeFiltered(b, bin, withFilter, rawEnv, filter))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	mb, mlc, mll, mbc, mr, mrs := median(bare), median(llCLI), median(llLib), median(bwCLI), median(raw), median(rawSeccomp)
	b.ReportMetric(us(mb), "bare-µs")
	b.ReportMetric(us(mlc), "landlock-cordon-µs")
	b.ReportMetric(us(mll), "landlock-runtime.Run-µs")
	b.ReportMetric(us(mbc), "bwrap-cordon-µs")
	b.ReportMetric(us(mr), "raw-bwrap-µs")
	b.ReportMetric(us(mrs), "raw-bwrap-seccomp-µs")
	b.ReportMetric(float64(mlc)/float64(mb), "landlock-cordon/bare")
	b.ReportMetric(float64(mll)/float64(mb), "landlock-runtime.Run/bare")
	b.ReportMetric(float64(mlc)/float64(mbc), "landlock/bwrap-cordon")
	b.ReportMetric(us(mrs-mr), "seccomp-added-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkOCI runs `true`, interleaved in one loop: through `cordon exec
// --substrate oci`; as raw `runc run` of the bundle `cordon oci bundle`
// writes for it (the same config.json, a container of its own each run);
// through `cordon exec` on bwrap; and bare. The figure of the issue is
// oci-cordon/raw-runc.
func BenchmarkOCI(b *testing.B) {
	needBwrap(b)
	runc, err := exec.LookPath("runc")
	if err != nil {
		b.Skip("runc:", err)
	}
	cordon := buildCordon(b)
	benchHarness(b)
	ws := benchWorkspace(b)
	bundle := filepath.Join(b.TempDir(), "bundle")
	c := exec.Command(cordon, "oci", "bundle", "--out", bundle, "--", "true")
	c.Dir = ws
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("oci bundle: %v %s", err, out)
	}
	state := b.TempDir()
	trueBin, _ := exec.LookPath("true")
	var bare, ociCLI, raw, bwCLI []time.Duration
	b.ResetTimer()
	for i := range b.N {
		bare = append(bare, timeRun(b, exec.Command(trueBin)))

		c := exec.Command(cordon, "exec", "--substrate", "oci", "--", "true")
		c.Dir = ws
		ociCLI = append(ociCLI, timeRun(b, c))

		name := fmt.Sprintf("cordon-bench-%d-%d", os.Getpid(), i)
		raw = append(raw, timeRun(b, exec.Command(runc, "--root", state, "run", "--bundle", bundle, name)))
		exec.Command(runc, "--root", state, "delete", "--force", name).Run()

		c = exec.Command(cordon, "exec", "--", "true")
		c.Dir = ws
		bwCLI = append(bwCLI, timeRun(b, c))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	mb, mo, mr, mw := median(bare), median(ociCLI), median(raw), median(bwCLI)
	b.ReportMetric(us(mb), "bare-µs")
	b.ReportMetric(us(mo), "oci-cordon-µs")
	b.ReportMetric(us(mr), "raw-runc-µs")
	b.ReportMetric(us(mw), "bwrap-cordon-µs")
	b.ReportMetric(float64(mo)/float64(mr), "oci-cordon/raw-runc")
	b.ReportMetric(float64(mr)/float64(mw), "raw-runc/bwrap-cordon")
	b.ReportMetric(0, "ns/op")
}
