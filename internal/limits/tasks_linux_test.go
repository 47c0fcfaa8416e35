package limits

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestUserTasks: RLIMIT_NPROC counts threads, and so does the count.
func TestUserTasks(t *testing.T) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	var own int
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			own, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if own < 2 {
		t.Fatalf("this process runs %d threads: the test cannot tell threads from processes", own)
	}
	if n := userProcesses(os.Getuid()); n < own {
		t.Errorf("counted %d tasks of uid %d; this process alone has %d threads", n, os.Getuid(), own)
	}
}
