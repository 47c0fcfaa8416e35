package runtime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cordon-run/cordon/runtime"
)

func TestResultJSONAndString(t *testing.T) {
	r := runtime.Result{ExitCode: 124, Signal: "SIGKILL", TimedOut: true, Stdout: "a<b>&c", StdoutBytes: 10,
		StdoutClipped: true, Duration: 1500 * time.Millisecond, Substrate: "bwrap", Sandboxed: true}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"exit_code", "signal", "timed_out", "canceled", "stdout", "stderr", "stdout_bytes", "stderr_bytes",
		"stdout_clipped", "stderr_clipped", "duration_ms", "substrate", "sandboxed", "mechanisms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, data)
		}
	}
	if m["duration_ms"] != 1500.0 || m["stdout"] != "a<b>&c" {
		t.Errorf("JSON %s", data)
	}
	if got, want := r.String(), "timed out (SIGKILL) after 1.5s on bwrap (sandboxed); stdout 10 bytes (clipped), stderr 0 bytes"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	host := runtime.Result{ExitCode: 3, Substrate: "host", Duration: time.Millisecond}
	if got := host.String(); got != "exit 3 after 1ms on host (not sandboxed); stdout 0 bytes, stderr 0 bytes" {
		t.Errorf("String() = %q", got)
	}
}
