//go:build race && linux

package landlock

// A binary built with the race detector sleeps a second as it exits
// (GORACE's atexit_sleep_ms, 1000 unless set), waiting for reports still
// on their way: every supervisor, whose environment is empty, slept so at
// the end of every run — most of what the test suite's Landlock runs
// took (TestProtectedPaths/landlock: 14.8 s, against 0.4 s without the
// detector). A race is still reported, and still exits 66.
func init() { helperEnv = []string{"GORACE=atexit_sleep_ms=0"} }
