package bwrap

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// sweepOrphansSoon ends, in the background, what the runs ids (the IDs
// of their placeholder sessions, gone without ending) left ([sweepOrphans]).
func sweepOrphansSoon(ids []string) { go sweepOrphans(ids) }

// sweepOrphans kills the sandboxes of runs whose cordon process died
// before it ended them: the bwrap processes whose program name
// ([argv0]) names the placeholder session of one of the runs ids. A run
// that finds the records of such runs of this user's
// ([placeholder.Session.Abandoned]) has it done. A cordon killed while
// bwrap sets a sandbox up leaves one of two behind:
//
//   - a sandbox it had not released: bwrap's child waits for ever, on the
//     eventfd its killed parent never wrote or on its block descriptor,
//     which it holds itself (holdFD);
//   - a sandbox it had released while bwrap was still mounting: its init
//     binds its life to its parent, bwrap, only once it forks the
//     command, and bwrap, killed with cordon, may be gone by then — the
//     command runs unsupervised, with no deadline, until this sweep.
//
// (As root the run's cgroups name their owner too, and the limits' sweep
// ends what runs in them.) Killing the sandbox's init ends its PID
// namespace, everything in it. Each process is signalled through a pidfd
// opened before it is read, so a PID used again by another process is
// never signalled.
func sweepOrphans(ids []string) {
	if len(ids) == 0 {
		return
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[argv0(id)] = true
	}
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
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if cmdline, err := os.ReadFile("/proc/" + n + "/cmdline"); err == nil {
			if name, _, _ := bytes.Cut(cmdline, []byte{0}); want[string(name)] {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
		}
		unix.Close(fd)
	}
}
