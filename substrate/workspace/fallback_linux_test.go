package workspace

import "testing"

// TestWalkFallback replays the boundary tables with openat2 switched off, as
// on kernels without it: the component-by-component walk must hold alike.
func TestWalkFallback(t *testing.T) {
	noOpenat2.Store(true)
	defer noOpenat2.Store(false)
	t.Run("read", TestReadReplay)
	t.Run("stat", TestStatReplay)
	t.Run("write", TestWriteReplay)
	t.Run("edit", TestEditReplay)
	t.Run("list", TestListReplay)
	t.Run("race", TestRaceSwapDirectoryForSymlink)
	t.Run("dot-dot after a symlink", TestDotDotAfterSymlink)
	t.Run("trailing slash", TestTrailingSlash)
	t.Run("root with any flags", TestOpenRootWithAnyFlags)
	t.Run("last dot", TestLastDotAndLinkSlash)
	t.Run("links and times", TestLinksAndTimesStayInside)
	t.Run("against os.Root", TestAgainstOSRootExhaustive)
}
