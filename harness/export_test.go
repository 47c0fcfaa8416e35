package harness

// Gitlinks and ParseGitlinks are the index reader, for the tests.
var (
	Gitlinks      = gitlinks
	ParseGitlinks = parseGitlinks
)

// Quarantined runs Protect on root, then change, then Quarantine.
func Quarantined(c Config, root string, change func()) ([]string, error) {
	p, err := c.Protect(root)
	if err != nil {
		return nil, err
	}
	change()
	return p.Quarantine()
}
