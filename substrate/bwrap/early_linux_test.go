package bwrap

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOptionsGoEarly: a sandbox whose bwrap is under every limit of its
// run from its birth hands bwrap its options as soon as they are built and
// their pipe is made — they wait in the pipe before bwrap runs; options
// that do not fit in the pipe at once, options not built yet, and a run
// with an rlimit (which bwrap gets only once it runs) wait for bwrap's
// start, and go then, once.
func TestOptionsGoEarly(t *testing.T) {
	small := []string{"--unshare-all", "--ro-bind", "/", "/"}
	long := []string{"--setenv", "X", strings.Repeat("x", 8192)}
	for _, c := range []struct {
		name         string
		early, built bool
		args         []string
		want         bool
	}{
		{"born limited", true, true, small, true},
		{"with an rlimit", false, true, small, false},
		{"not built", true, false, small, false},
		{"longer than the pipe holds", true, true, long, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
				t.Fatal(err)
			}
			s := &Sandbox{early: c.early, built: c.built, args: c.args, argsW: w}
			var want []byte
			for _, a := range s.sideArgs() {
				want = append(append(want, a...), 0)
			}
			s.sendEarly()
			rfd := int(r.Fd()) // Fd makes it blocking: once, before the mode is set
			if err := unix.SetNonblock(rfd, true); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64<<10)
			n, _ := unix.Read(rfd, buf)
			if got := max(n, 0); c.want != (got > 0) {
				t.Fatalf("before bwrap started, %d bytes of options in the pipe; want them there: %v", got, c.want)
			}
			if c.want {
				if !bytes.Equal(buf[:n], want) {
					t.Errorf("the options sent early: %q, want %q", buf[:n], want)
				}
				if n, _ := unix.Read(rfd, buf); n != 0 {
					t.Errorf("the pipe is not closed after the options (read %d)", n)
				}
				if err := s.sendArgs(); err != nil {
					t.Errorf("sendArgs once bwrap started, after the options went early: %v", err)
				}
				return
			}
			if err := unix.SetNonblock(rfd, false); err != nil {
				t.Fatal(err)
			}
			s.built = true // bwrap started: they go now, whole
			got := make(chan []byte)
			go func() { b, _ := io.ReadAll(r); got <- b }()
			if err := s.sendArgs(); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Errorf("the options sent once bwrap started: %d bytes, want %d", len(b), len(want))
			}
		})
	}
}
