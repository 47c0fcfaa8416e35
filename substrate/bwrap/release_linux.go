package bwrap

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reads tells the mount watches when a sandbox's init has read its
// seccomp program — it does so right after it takes its release, once
// its mounts are made ([Sandbox.releaseTaken]) — by an inotify event on
// the pipe (IN_ACCESS), not by asking every releaseEvery: ~50 wake-ups
// of this process while bwrap sets a sandbox up cost the run ~0.3–0.4 ms
// of its set-up here (runtime.Run of true, 800 runs alternated). One
// instance for the process, never closed (closing one waits for the
// kernel's SRCU grace period, milliseconds); a watch a run, removed when
// the run has its look. Nothing in the sandbox can read that pipe: its
// one other reading end is the init's, closed before the command starts.
var reads struct {
	once sync.Once
	fd   int      // the instance, or -1
	file *os.File // its file, kept: unreachable, it would be closed under the watches
	mu   sync.Mutex
	// waiting maps a watch descriptor to the channel closed at its event.
	waiting map[int32]chan struct{}
}

// watchRead returns a channel closed once the pipe of descriptor fd (a
// reading end this process holds) has been read from, and the end of the
// watch; a nil channel when it cannot be watched (ask instead). An
// overflow of the instance's queue closes every channel: each then asks.
func watchRead(fd uintptr) (<-chan struct{}, func()) {
	reads.once.Do(startReads)
	// Added and noted under the lock: its event, read meanwhile, waits.
	reads.mu.Lock()
	if reads.fd < 0 {
		reads.mu.Unlock()
		return nil, func() {}
	}
	inst := reads.fd
	wd, err := unix.InotifyAddWatch(inst, "/proc/self/fd/"+strconv.Itoa(int(fd)), unix.IN_ACCESS|unix.IN_MASK_CREATE)
	if err != nil {
		reads.mu.Unlock()
		return nil, func() {}
	}
	ch := make(chan struct{})
	reads.waiting[int32(wd)] = ch
	reads.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			reads.mu.Lock()
			delete(reads.waiting, int32(wd))
			reads.mu.Unlock()
			unix.InotifyRmWatch(inst, uint32(wd)) // gone with its pipe already: no matter
		})
	}
}

func startReads() {
	reads.fd = -1
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return
	}
	if !readsSeen(fd) {
		// A kernel (or an emulation of one) that says nothing of a
		// pipe's reads: the watches ask, as where there is no inotify.
		unix.Close(fd)
		return
	}
	reads.fd, reads.waiting = fd, map[int32]chan struct{}{}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: read through the runtime's poller
	reads.file = f
	go func() {
		buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
		for {
			n, err := f.Read(buf)
			if err != nil && !errors.Is(err, unix.EINTR) {
				// Never expected: every watch left asks from now on.
				reads.mu.Lock()
				for wd, ch := range reads.waiting {
					close(ch)
					delete(reads.waiting, wd)
				}
				reads.fd = -1
				reads.mu.Unlock()
				return
			}
			reads.mu.Lock()
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
					for wd, ch := range reads.waiting {
						close(ch)
						delete(reads.waiting, wd)
					}
					continue
				}
				if ch, ok := reads.waiting[ev.Wd]; ok {
					close(ch)
					delete(reads.waiting, ev.Wd)
				}
			}
			reads.mu.Unlock()
		}
	}()
}

// readsSeen reports whether the inotify instance fd (non-blocking) says
// that a pipe was read from: a pipe of its own, written, watched, read.
// Linux 6.14 made most pseudo files silent to inotify and kept pipes
// speaking; a kernel that does not would leave every watch waiting for
// its backstop, and short runs unwatched.
func readsSeen(fd int) bool {
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC) != nil {
		return false
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if _, err := unix.Write(p[1], []byte{1}); err != nil {
		return false
	}
	wd, err := unix.InotifyAddWatch(fd, "/proc/self/fd/"+strconv.Itoa(p[0]), unix.IN_ACCESS)
	if err != nil {
		return false
	}
	defer unix.InotifyRmWatch(fd, uint32(wd))
	var b [1]byte
	if n, err := unix.Read(p[0], b[:]); n != 1 || err != nil {
		return false
	}
	buf := make([]byte, 4*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	n, err := unix.Read(fd, buf)
	for off := 0; err == nil && off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		if ev.Wd == int32(wd) && ev.Mask&unix.IN_ACCESS != 0 {
			return true
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	return false
}
