package limits

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ProcessID names the process pid so that no other process shares the
// name: PID-START-NS, START its start time (field 22 of /proc/PID/stat,
// which a PID used again does not share) and NS the inode of its PID
// namespace (a PID means another process in another namespace). "" when
// the process cannot be read. The cgroups of a run ([Plan.Start]) and
// the oci substrate's bundles name their owner so, for a later cordon
// process to judge whether the owner is gone ([Gone]).
func ProcessID(pid int) string {
	start := startTime(pid)
	if start == "" {
		return ""
	}
	return strconv.Itoa(pid) + "-" + start + "-" + pidNamespace(strconv.Itoa(pid))
}

// SelfID is this process's [ProcessID], read once.
var SelfID = sync.OnceValue(func() string { return ProcessID(os.Getpid()) })

// Gone reports whether the process id names ([ProcessID]) is known to be
// gone: one of this process's PID namespace whose PID now names no
// process, or another one. An id that cannot be read, or of another PID
// namespace, is not judged: false. The form "PID START" (bundles of
// before) is judged by PID and start time alone.
func Gone(id string) bool {
	var pidStr, start, ns string
	if p, s, ok := strings.Cut(id, " "); ok {
		pidStr, start = p, strings.TrimSpace(s)
	} else {
		parts := strings.Split(id, "-")
		if len(parts) != 3 {
			return false
		}
		pidStr, start, ns = parts[0], parts[1], parts[2]
		if ns == "" || ns != pidNamespace("self") {
			return false
		}
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 || start == "" {
		return false
	}
	return startTime(pid) != start
}

func startTime(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(data, ')') // the command name may hold spaces
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// pidNamespace is the inode of the PID namespace of /proc/WHO, or "".
func pidNamespace(who string) string {
	l, err := os.Readlink("/proc/" + who + "/ns/pid")
	if err != nil {
		return ""
	}
	inode, _ := strings.CutPrefix(l, "pid:[")
	return strings.TrimSuffix(inode, "]")
}
