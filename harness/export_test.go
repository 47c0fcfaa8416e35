package harness

// Gitlinks and ParseGitlinks are the index reader, for the tests.
var (
	Gitlinks      = gitlinks
	ParseGitlinks = parseGitlinks
)
