package harness

import (
	"sync/atomic"
	"time"
)

// Gitlinks and ParseGitlinks are the index reader, for the tests.
var (
	Gitlinks      = gitlinks
	ParseGitlinks = parseGitlinks
)

// IndexUnchanged reads the index at path as Protect does, as if that had
// been after (later by) and asks after the change (change) whether it is
// unchanged.
func IndexUnchanged(path string, after time.Duration, change func()) (bool, error) {
	_, seen, err := gitlinks(path, 20)
	if err != nil || seen == nil {
		return false, err
	}
	seen.at = seen.at.Add(after)
	change()
	return seen.unchanged(path), nil
}

// Quarantined runs Protect on root, then change, then Quarantine.
func Quarantined(c Config, root string, change func()) ([]string, error) {
	p, err := c.Protect(root)
	if err != nil {
		return nil, err
	}
	change()
	return p.Quarantine()
}

// CountIndexReads counts the index files read from now to the end of t,
// each looked at as if later by after (a change time settled sooner).
func CountIndexReads(t interface{ Cleanup(func()) }, after time.Duration) func() int {
	var n atomic.Int64
	readIndexHook = func(string) { n.Add(1) }
	indexClock = func() time.Time { return time.Now().Add(after) }
	t.Cleanup(func() { readIndexHook, indexClock = nil, time.Now })
	return func() int { return int(n.Load()) }
}
