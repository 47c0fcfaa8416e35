package limits

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/capabilities"
)

const cgroupRoot = "/sys/fs/cgroup"

var (
	detectOnce sync.Once
	detected   Host
)

// Detect finds what this host offers, once per process: for the memory
// and pids controllers, the directory of this process's cgroup in the v1
// hierarchy when this process may create cgroups in it.
func Detect() Host {
	detectOnce.Do(func() { detected = detect() })
	return detected
}

func detect() Host {
	h := Host{UID: os.Getuid(), V1: map[string]string{}, Why: map[string]string{}}
	mounts := cgroupMounts()
	if v2, ok := mounts[""]; ok {
		h.V2 = v2
		if data, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers")); err == nil {
			h.V2Controllers = strings.Fields(string(data))
		}
	}
	self := selfCgroups()
	for _, c := range []string{"memory", "pids"} {
		mnt, ok := mounts[c]
		if !ok {
			h.Why[c] = "no v1 hierarchy of the " + c + " controller is mounted"
			if h.V2 != "" {
				h.Why[c] += "; the cgroup v2 tree at " + h.V2 + " is not used"
			}
			continue
		}
		dir := filepath.Join(mnt, self[c])
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			h.Why[c] = fmt.Sprintf("%s is not writable by uid %d: %v", dir, h.UID, err)
			continue
		}
		h.V1[c] = dir
	}
	return h
}

// cgroupMounts maps each v1 controller to its mount point, and "" to the
// v2 tree's.
func cgroupMounts() map[string]string {
	m := map[string]string{}
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		switch fields[2] {
		case "cgroup2":
			if _, ok := m[""]; !ok {
				m[""] = fields[1]
			}
		case "cgroup":
			for _, opt := range strings.Split(fields[3], ",") {
				if opt == "memory" || opt == "pids" {
					if _, ok := m[opt]; !ok {
						m[opt] = fields[1]
					}
				}
			}
		}
	}
	return m
}

// selfCgroups maps each v1 controller to this process's cgroup path.
func selfCgroups() map[string]string { return cgroupsOf(0) }

// cgroupsOf maps each v1 controller to the cgroup path of process pid
// (0: this process); empty when the process is gone.
func cgroupsOf(pid int) map[string]string {
	m := map[string]string{}
	file := "/proc/self/cgroup"
	if pid > 0 {
		file = "/proc/" + strconv.Itoa(pid) + "/cgroup"
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return m
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m
}

// Group is the limits of one run.
type Group struct {
	plan  Plan
	extra int
	id    string            // the name of the run's cgroups
	dirs  map[string]string // controller → the run's cgroup
	nproc uint64            // RLIMIT_NPROC: the user's tasks before the run, plus the run's
	born  bool              // Enter put the forking thread in every cgroup of the run
	// counters are the run's event counts (memory.oom_control,
	// memory.failcnt, pids.events), opened with the cgroups: read again
	// from offset 0, each gives its current value, so what the limits saw
	// is read when the run ends in one pread(2) a file — not an open,
	// read and close each, on the path from the run's end to its outcome.
	counters map[string]*os.File
	// tasks are the descriptors of the run's cgroups' tasks files, opened
	// with them: Enter moves the forking thread by a write to each, not
	// an open, a write and a close (cgroupfs: ~10 µs a file, on the path
	// to bwrap's fork).
	tasks map[string]int
}

// backTo holds this process's own tasks files (cgroup → descriptor),
// opened at the first leave and kept for the life of the process.
var backTo sync.Map

// leaveTo moves the calling thread back into the cgroup whose tasks file
// is path.
func leaveTo(path string) error {
	fd, ok := backTo.Load(path)
	if !ok {
		f, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("limits: cannot open %s: %w", path, err)
		}
		if fd, ok = backTo.LoadOrStore(path, f); ok {
			unix.Close(f)
		}
	}
	return writeTo(fd.(int), path, "0")
}

// Start makes the run's cgroups (cordon-<random> below this process's),
// with the limits written; extra is the number of the substrate's own
// processes that run in them beside the tool's (bwrap and the sandbox's
// init: 2).
func (p Plan) Start(extra int) (*Group, error) {
	var name [8]byte
	rand.Read(name[:])
	// The owner in the name: another cordon process removes the cgroup,
	// and ends what still runs in it, once this one is gone.
	id := "cordon-" + hex.EncodeToString(name[:]) + "-" + SelfID()
	g := &Group{plan: p, extra: extra, id: id, dirs: map[string]string{}, counters: map[string]*os.File{}, tasks: map[string]int{}}
	mk := func(c string, files ...string) error {
		dir := filepath.Join(p.host.V1[c], id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("limits: cannot create the %s cgroup %s: %w", c, dir, err)
		}
		g.dirs[c] = dir
		for i := 0; i+1 < len(files); i += 2 {
			if err := writeFile(filepath.Join(dir, files[i]), files[i+1]); err != nil {
				return err
			}
		}
		fd, err := unix.Open(filepath.Join(dir, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("limits: cannot open the tasks of the cgroup %s: %w", dir, err)
		}
		g.tasks[c] = fd
		for _, name := range counterFiles[c] {
			f, err := os.Open(filepath.Join(dir, name))
			if err != nil {
				return fmt.Errorf("limits: cannot open %s of the cgroup %s: %w", name, dir, err)
			}
			g.counters[name] = f
		}
		return nil
	}
	if p.Memory == Cgroup1 {
		n := strconv.FormatInt(p.Spec.Memory, 10)
		if err := mk("memory", "memory.limit_in_bytes", n); err != nil {
			g.Close()
			return nil, err
		}
		// Swap counts too where the kernel accounts it: a tool cannot
		// page its way past the limit.
		if sw := filepath.Join(g.dirs["memory"], "memory.memsw.limit_in_bytes"); fileExists(sw) {
			if err := writeFile(sw, n); err != nil {
				g.Close()
				return nil, err
			}
		}
	}
	if p.Pids == Cgroup1 {
		if err := mk("pids", "pids.max", strconv.Itoa(p.Spec.Pids+extra)); err != nil {
			g.Close()
			return nil, err
		}
	}
	if p.Pids == Rlimit {
		// Counted before anything of the run exists: counted later, the
		// run's first processes (and whatever else came meanwhile) would
		// be counted as the user's others and added to the tool's share.
		g.nproc = uint64(userProcesses(p.host.UID) + p.Spec.Pids + extra)
	}
	return g, nil
}

// Add puts the process pid — one of the run's, which has not started the
// tool yet — in the run's cgroups and sets its rlimits, which every
// process it starts inherits. A process already in the run's cgroups (a
// child of one added before it forked) is not moved again: a move (v1)
// waits for the kernel's RCU, milliseconds; nor, after Enter, is the
// process the entered thread forked, born in them, looked up. Calls of
// Add are not concurrent; one after Enter is for the process forked
// then.
func (g *Group) Add(pid int) error { return g.add(pid, true) }

// AddLeavingAS is Add without RLIMIT_AS, for a run whose first processes
// are Go programs of cordon's (a Go runtime reserves more address space
// than a small limit allows) that set the limit themselves just before
// they execute the tool.
func (g *Group) AddLeavingAS(pid int) error { return g.add(pid, false) }

func (g *Group) add(pid int, as bool) error {
	var member map[string]string
	for _, c := range []string{"memory", "pids"} {
		if dir, ok := g.dirs[c]; ok && !g.born {
			if member == nil {
				member = cgroupsOf(pid)
			}
			if strings.HasSuffix(member[c], "/"+g.id) {
				continue
			}
			if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
				if errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("%w: %w", ErrGone, err)
				}
				return err
			}
		}
	}
	set := func(res int, name string, v uint64, hard uint64) error {
		lim := unix.Rlimit{Cur: v, Max: hard}
		if err := unix.Prlimit(pid, res, &lim, nil); errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%w: %w", ErrGone, err)
		} else if err != nil {
			return fmt.Errorf("limits: cannot set %s=%d on process %d: %w", name, v, pid, err)
		}
		return nil
	}
	if g.plan.Memory == Rlimit && as {
		if err := set(unix.RLIMIT_AS, "RLIMIT_AS", uint64(g.plan.Spec.Memory), uint64(g.plan.Spec.Memory)); err != nil {
			return err
		}
	}
	if g.plan.Pids == Rlimit {
		n := g.nproc
		if err := set(unix.RLIMIT_NPROC, "RLIMIT_NPROC", n, n); err != nil {
			return err
		}
	}
	if g.plan.CPU == Rlimit {
		s := cpuSeconds(g.plan.Spec.CPU)
		if err := set(unix.RLIMIT_CPU, "RLIMIT_CPU", s, s+1); err != nil {
			return err
		}
	}
	return nil
}

// Enter moves the calling thread, which is locked to its goroutine and
// about to fork the run's first process, into the run's cgroups, so that
// the process is born in them; leave moves the thread back to this
// process's cgroups. A thread that moves itself is not a whole process's
// move, which (v1) takes the kernel's cgroup threadgroup lock for writing
// and with it waits for an RCU grace period: milliseconds.
func (g *Group) Enter() (leave func(), err error) {
	var entered []string
	leave = func() {
		for _, c := range entered {
			leaveTo(filepath.Join(g.plan.host.V1[c], "tasks"))
		}
	}
	for _, c := range []string{"memory", "pids"} {
		if fd, ok := g.tasks[c]; ok {
			if err := writeTo(fd, filepath.Join(g.dirs[c], "tasks"), "0"); err != nil {
				leave()
				return func() {}, err
			}
			entered = append(entered, c)
		}
	}
	g.born = true
	return leave, nil
}

// exists reports whether every cgroup of the run is still there.
func (g *Group) exists() bool {
	for _, dir := range g.dirs {
		if _, err := os.Stat(dir); err != nil {
			return false
		}
	}
	return true
}

// MemoryExceeded reports whether the run reached its memory cgroup's limit
// (the kernel's OOM killer then ended a process of it).
func (g *Group) MemoryExceeded() bool {
	data, err := g.counter("memory.oom_control")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok && v != "0" {
			return true
		}
	}
	data, err = g.counter("memory.failcnt")
	return err == nil && strings.TrimSpace(string(data)) != "0"
}

// PidsExceeded reports whether a fork of the run failed at its pids
// cgroup's limit.
func (g *Group) PidsExceeded() bool {
	data, err := g.counter("pids.events")
	if err != nil {
		return false
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "max ")
	return ok && v != "0"
}

// counterFiles are the files of each controller whose counts Notes reads.
var counterFiles = map[string][]string{
	"memory": {"memory.oom_control", "memory.failcnt"},
	"pids":   {"pids.events"},
}

// counter reads one of the run's counter files (counterFiles) from its
// start; an error if the run has no cgroup of that controller.
func (g *Group) counter(name string) ([]byte, error) {
	f, ok := g.counters[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	buf := make([]byte, 512) // memory.oom_control, the longest, is ~60 bytes
	n, err := f.ReadAt(buf, 0)
	if n == 0 && err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// Close kills whatever is left in the run's cgroups (nothing, after a run
// whose tree was killed) and removes them.
func (g *Group) Close() error {
	var errs []error
	for c, fd := range g.tasks {
		unix.Close(fd)
		delete(g.tasks, c)
	}
	for name, f := range g.counters {
		f.Close()
		delete(g.counters, name)
	}
	for _, c := range []string{"pids", "memory"} {
		dir, ok := g.dirs[c]
		if !ok {
			continue
		}
		// Removed at once when the run's processes are gone, as they are
		// once its tree has ended. Should the removal fail, whatever is
		// still in the cgroup is killed — and the removal tried again
		// while the cgroup is busy (EBUSY).
		var err error
		for range 200 { // bounded: 200 × ≤5 ms
			if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			for _, pid := range procsOf(dir) {
				if pid != os.Getpid() { // a thread of this process's that did not leave: never this process
					unix.Kill(pid, unix.SIGKILL)
				}
			}
			if !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("limits: cannot remove the cgroup %s: %w", dir, err))
		}
		delete(g.dirs, c)
	}
	return errors.Join(errs...)
}

// sweepAge is how old an empty cgroup of a run must be before another
// cordon process removes it (see sweep).
const sweepAge = 10 * time.Minute

var sweepOnce sync.Once

// Sweep starts, once in the life of the process, the sweep of the cgroups
// of runs whose cordon is gone (see sweep) in the background. A run calls
// it once its tool runs, off the path of the setting up, where the look
// would compete with the run for the processor.
func (g *Group) Sweep() {
	if g == nil || len(g.dirs) == 0 {
		return
	}
	sweepOnce.Do(func() { go sweep(g.plan.host.V1, time.Now().Add(-sweepAge)) })
}

// sweep removes the cgroups of runs whose cordon is gone without removing
// them (killed, a server whose waiting sandboxes died with it), beside
// this process's:
//
//   - cordon-<16 hex>-<owner>, whose owner ([ProcessID]) is [Gone]: what still runs in
//     it is killed first. That is a sandbox of the dead owner's — bwrap's
//     child, made in the owner's cgroup, can outlive the owner when the
//     owner dies while bwrap sets the sandbox up (it then waits for its
//     parent forever, reparented to init);
//   - cordon-<16 hex>, of cordon before owners were named, empty, and made
//     before the time given.
//
// A run's cgroup is empty only for an instant after its tree ended (and
// before its first process was born in it): a run going on, pooled
// sandboxes included, is never touched, and a Close that finds its cgroup
// gone is content.
func sweep(v1 map[string]string, before time.Time) {
	for _, parent := range v1 {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			rest, ok := strings.CutPrefix(name, "cordon-")
			if !ok || len(rest) < 16 || !e.IsDir() {
				continue
			}
			if _, err := hex.DecodeString(rest[:16]); err != nil {
				continue
			}
			dir := filepath.Join(parent, name)
			if len(rest) == 16 {
				info, err := e.Info()
				if err != nil || info.ModTime().After(before) || len(procsOf(dir)) > 0 {
					continue
				}
				unix.Rmdir(dir) // EBUSY if a process came meanwhile: it stays
				continue
			}
			if !Gone(strings.TrimPrefix(rest[16:], "-")) {
				continue
			}
			for i := 0; i < 50; i++ {
				pids := procsOf(dir)
				if len(pids) == 0 {
					break
				}
				for _, pid := range pids {
					unix.Kill(pid, unix.SIGKILL)
				}
				time.Sleep(2 * time.Millisecond)
			}
			for i := 0; i < 50 && unix.Rmdir(dir) == unix.EBUSY; i++ {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
}

func procsOf(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// userProcesses counts what RLIMIT_NPROC counts for uid: its tasks —
// threads, not processes (a Go program has a dozen) — from the link count
// of each /proc/PID/task owned by it (two plus the number of threads). By
// the effective uid; RLIMIT_NPROC counts by the real one, the same for
// the processes of a user who runs no setuid program.
func userProcesses(uid int) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(d.Fd()), name+"/task", &st, 0) == nil && int(st.Uid) == uid {
			n += max(int(st.Nlink)-2, 1)
		}
	}
	return n
}

func writeFile(path, v string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("limits: cannot open %s: %w", path, err)
	}
	defer unix.Close(fd)
	return writeTo(fd, path, v)
}

// writeTo writes v to fd, the file path open for writing. A write the
// kernel gave up on for a signal (EINTR: the Go runtime preempts its
// threads with SIGURG, and a v1 memory limit's write reclaims until the
// usage fits, checking for signals) took no effect, and is made again.
func writeTo(fd int, path, v string) error {
	for {
		_, err := unix.Write(fd, []byte(v))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("limits: cannot write %s to %s: %w", v, path, err)
		}
		return nil
	}
}

func fileExists(path string) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil
}

func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// Self is what the run's first process applies to itself, for a substrate
// whose helpers are Go processes (their runtime and address space must
// not count against the tool): it joins the cgroups, then sets the
// rlimits just before it executes the tool.
type Self struct {
	// Procs are the cgroup.procs files of the run's cgroups.
	Procs []string `json:"procs,omitempty"`
	// AS is RLIMIT_AS in bytes, CPU RLIMIT_CPU in seconds (0: none).
	AS  uint64 `json:"as,omitempty"`
	CPU uint64 `json:"cpu,omitempty"`
	// NProc is the number of tasks the tool may have, itself included:
	// RLIMIT_NPROC is set to the user's other tasks then plus NProc.
	NProc int `json:"nproc,omitempty"`
	UID   int `json:"uid"`
}

// Self returns what the run's first process applies to itself (see
// [Self]); Add is then not used.
func (g *Group) Self() Self {
	s := Self{UID: g.plan.host.UID}
	for _, c := range []string{"memory", "pids"} {
		if dir, ok := g.dirs[c]; ok {
			s.Procs = append(s.Procs, filepath.Join(dir, "cgroup.procs"))
		}
	}
	if g.plan.Memory == Rlimit {
		s.AS = uint64(g.plan.Spec.Memory)
	}
	if g.plan.CPU == Rlimit {
		s.CPU = cpuSeconds(g.plan.Spec.CPU)
	}
	if g.plan.Pids == Rlimit {
		s.NProc = g.plan.Spec.Pids
	}
	return s
}

// Join puts this process in the run's cgroups.
func (s Self) Join() error {
	for _, procs := range s.Procs {
		if err := writeFile(procs, strconv.Itoa(os.Getpid())); err != nil {
			return err
		}
	}
	return nil
}

// Apply sets the rlimits on this process. Call it last before executing
// the tool: a Go process allocates on its own, and RLIMIT_AS is meant for
// the tool.
func (s Self) Apply() error {
	set := func(res int, name string, cur, hard uint64) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: cur, Max: hard}); err != nil {
			return fmt.Errorf("limits: cannot set %s=%d: %w", name, cur, err)
		}
		return nil
	}
	if s.NProc > 0 {
		// This process becomes the tool, one task, when it executes it:
		// its threads are not the user's other tasks.
		var self unix.Stat_t
		own := 1
		if unix.Stat("/proc/self/task", &self) == nil {
			own = max(int(self.Nlink)-2, 1)
		}
		n := uint64(userProcesses(s.UID) - own + s.NProc)
		if err := set(unix.RLIMIT_NPROC, "RLIMIT_NPROC", n, n); err != nil {
			return err
		}
	}
	if s.CPU > 0 {
		if err := set(unix.RLIMIT_CPU, "RLIMIT_CPU", s.CPU, s.CPU+1); err != nil {
			return err
		}
	}
	if s.AS > 0 {
		if err := set(unix.RLIMIT_AS, "RLIMIT_AS", s.AS, s.AS); err != nil {
			return err
		}
	}
	return nil
}

// Notes says which limit the run reached, one line each, for its result.
func (g *Group) Notes() []string {
	var notes []string
	if g.MemoryExceeded() {
		notes = append(notes, fmt.Sprintf("the run reached its memory limit (%s, cgroup): the kernel's OOM killer ended a process of it", capabilities.FormatSize(g.plan.Spec.Memory)))
	}
	if g.PidsExceeded() {
		notes = append(notes, fmt.Sprintf("the run reached its process limit (%d, cgroup): a fork failed", g.plan.Spec.Pids))
	}
	return notes
}
