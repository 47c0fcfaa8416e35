package harness

import "time"

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
