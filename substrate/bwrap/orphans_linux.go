package bwrap

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/placeholder"
)

func init() { placeholder.SetSweeper(sweepOrphans) }

// sweepOrphans kills what the sandbox of a run whose cordon process died
// before it ended it left. Any later run of the same state directory that
// finds the run's record with its lock free has it done (in the
// background; the record goes once it is done). A cordon killed while
// bwrap sets a sandbox up leaves one of two behind:
//
//   - a sandbox it had not released: bwrap's child waits for ever, on the
//     eventfd its killed parent never wrote or on its block descriptor,
//     which it holds itself (holdFD). It runs nothing, and is found by
//     its program name, which names the run ([argv0]);
//   - a sandbox it had released while bwrap was still mounting: its init
//     binds its life to its parent, bwrap, only once it forks the
//     command, and bwrap, killed with cordon, may be gone by then — the
//     command runs unsupervised, with no deadline, until this sweep. It
//     is found by the IDs the run noted before the release (the init's
//     and bwrap's [limits.ProcessID]: a PID and its start time), which,
//     unlike its command line, nothing in the sandbox can change.
//
// (As root the run's cgroups name their owner too, and the limits' sweep
// ends what runs in them.) Killing the sandbox's init ends its PID
// namespace, everything in it. Each process is signalled through a pidfd
// opened before it is checked, so a PID used again by another process is
// never signalled.
func sweepOrphans(a placeholder.Abandoned) {
	for _, id := range a.Processes {
		pid, _, _ := bytes.Cut([]byte(id), []byte("-"))
		if n, err := strconv.Atoi(string(pid)); err == nil && n > 1 {
			killIf(n, func() bool { return limits.ProcessID(n) == id })
		}
	}
	name := []byte(argv0(a.ID))
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 1 {
			continue
		}
		comm, err := os.ReadFile("/proc/" + n + "/comm")
		if err != nil || string(comm) != "bwrap\n" {
			continue
		}
		killIf(pid, func() bool {
			cmdline, err := os.ReadFile("/proc/" + n + "/cmdline")
			prog, _, _ := bytes.Cut(cmdline, []byte{0})
			return err == nil && bytes.Equal(prog, name)
		})
	}
}

// killIf sends SIGKILL to process pid if it is still what match says,
// through a pidfd opened before match looks.
func killIf(pid int, match func() bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if match() {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}
