package limits

import (
	"strconv"
	"sync"
	"time"
)

// Spares makes the cgroups of a resident caller's runs ahead of them: a
// run that takes a spare does not wait for its cgroups to be made (a v1
// memory cgroup takes a fraction of a millisecond), and the next one is
// made after the run, off its path. A spare is an empty cgroup with the
// limits of its plan written, as [Plan.Start] makes it; a run takes one
// only of exactly its plan. A plan whose Start counts something (the
// user's processes, for an RLIMIT_NPROC) or makes no cgroup has none.
// Close removes the spares; those of a process killed are swept like
// any abandoned cgroup. A spare is taken within a minute of being made
// (and replaced after that), long before a sweep would take it for
// abandoned. A spare is made for a plan once a second run
// has taken its cgroups, or when the caller knows its next run's plan
// ([Spares.Ahead]): a caller that runs once (a command line) makes none
// otherwise. The zero value is ready; a nil *Spares makes none.
type Spares struct {
	mu     sync.Mutex
	ready  map[string]spare
	making map[string]chan struct{} // closed once the spare being made is ready, or failed
	runs   map[string]int
	closed bool
	wg     sync.WaitGroup
}

type spare struct {
	g    *Group
	made time.Time
}

// spareAge is how long a spare is taken: well before another process's
// sweep may take it for abandoned (sweepAge).
const spareAge = time.Minute

// spareKey is the plan a spare was made for, or "" for a plan that has
// none.
func spareKey(p Plan, extra int) string {
	if p.Pids == Rlimit || p.Memory != Cgroup1 && p.Pids != Cgroup1 {
		return ""
	}
	// Built by hand: fmt's %+v of the plan reflects over it, on the path
	// of every run.
	b := make([]byte, 0, 96)
	b = strconv.AppendInt(b, p.Spec.Memory, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(p.Spec.Pids), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(p.Spec.CPU), 10)
	for _, w := range []Way{p.Memory, p.Pids, p.CPU} {
		b = append(append(b, ' '), w...)
	}
	b = append(b, ' ')
	b = strconv.AppendBool(b, p.DefaultMemory)
	b = append(b, ' ')
	b = strconv.AppendBool(b, p.DefaultPids)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(extra), 10)
	return string(b)
}

// Take returns a spare for a run of p, or nil when there is none fresh
// (the run makes its own: [Plan.Start]); it counts the run. A spare being
// made for p ([Spares.Ahead]) is waited for.
func (s *Spares) Take(p Plan, extra int) *Group {
	k := spareKey(p, extra)
	if s == nil || k == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.making[k]; ch != nil {
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	sp, ok := s.ready[k]
	delete(s.ready, k)
	if s.runs == nil {
		s.runs = map[string]int{}
	}
	s.runs[k]++
	if !ok {
		return nil
	}
	// Still there: a clock that jumped (a suspend, which the monotonic
	// clock does not count) can have let another process's sweep take it.
	if time.Since(sp.made) < spareAge && sp.g.exists() {
		return sp.g
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sp.g.Close()
	}()
	return nil
}

// Refill makes a spare for the next run of p, if there is none and p
// has run twice; call it off the run's path, once the run is over.
func (s *Spares) Refill(p Plan, extra int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.runs[spareKey(p, extra)] < 2 {
		s.mu.Unlock()
		return
	}
	done := s.startMaking(p, extra)
	s.mu.Unlock()
	if done != nil {
		done()
	}
}

// Ahead makes, in the background, a spare for a run of p that is about
// to be asked for: a command line that has admitted its command makes
// the run's cgroups while it gets ready to run it. The run's Take waits
// for it.
func (s *Spares) Ahead(p Plan, extra int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	done := s.startMaking(p, extra)
	s.mu.Unlock()
	if done != nil {
		go done()
	}
}

// startMaking notes a spare of p as being made, unless there is one or
// one is being made, and returns what makes it (nil: nothing to make).
// Call it with s.mu held.
func (s *Spares) startMaking(p Plan, extra int) func() {
	k := spareKey(p, extra)
	if k == "" || s.closed || s.making[k] != nil {
		return nil
	}
	if _, ok := s.ready[k]; ok {
		return nil
	}
	ch := make(chan struct{})
	if s.making == nil {
		s.making = map[string]chan struct{}{}
	}
	s.making[k] = ch
	s.wg.Add(1)
	return func() {
		defer s.wg.Done()
		g, err := p.Start(extra) // on an error the run makes its own, and says why it could not
		s.mu.Lock()
		delete(s.making, k)
		close(ch)
		if _, ok := s.ready[k]; err != nil || s.closed || ok {
			s.mu.Unlock()
			if err == nil {
				g.Close()
			}
			return
		}
		if s.ready == nil {
			s.ready = map[string]spare{}
		}
		s.ready[k] = spare{g, time.Now()}
		s.mu.Unlock()
	}
}

// Close removes the spares; no more are made.
func (s *Spares) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	ready := s.ready
	s.ready = nil
	s.mu.Unlock()
	s.wg.Wait()
	for _, sp := range ready {
		sp.g.Close()
	}
}
