package capabilities

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, canon string
		err       error
	}{
		{"fs.read:workspace", "fs.read:workspace", nil},
		{"fs.write:workspace", "fs.write:workspace", nil},
		{"fs.read:/etc", "", ErrUnknown},
		{"fs.read:", "", ErrUnknown},
		{"net:none", "net:none", nil},
		{"net:host", "net:host", nil},
		{"net:all", "", ErrUnknown},
		{"net.connect:tcp:443", "net.connect:tcp:443", nil},
		{"net.connect:tcp:1", "net.connect:tcp:1", nil},
		{"net.connect:tcp:65535", "net.connect:tcp:65535", nil},
		{"net.connect:tcp:65536", "", ErrRange},
		{"net.connect:tcp:0", "", ErrRange},
		{"net.connect:tcp:-1", "", ErrSyntax},
		{"net.connect:tcp:+443", "", ErrSyntax},
		{"net.connect:tcp:0443", "", ErrSyntax},
		{"net.connect:tcp:0x1bb", "", ErrSyntax},
		{"net.connect:tcp:99999999999999999999999", "", ErrRange},
		{"net.connect:tcp:", "", ErrSyntax},
		{"net.connect:udp:53", "", ErrUnknown},
		{"net.connect:host:Example.COM", "net.connect:host:example.com", nil},
		{"net.connect:host:127.0.0.1", "net.connect:host:127.0.0.1", nil},
		{"net.connect:host:-bad.com", "", ErrSyntax},
		{"net.connect:host:*.Example.com:443", "net.connect:host:*.example.com:443", nil},
		{"net.connect:host:pypi.org:443", "net.connect:host:pypi.org:443", nil},
		{"net.connect:host:[::1]:8080", "net.connect:host:[::1]:8080", nil},
		{"net.connect:host:*.com", "", ErrSyntax},
		{"net.connect:host:example.com:0", "", ErrRange},
		{"net.connect:host:example.com:08", "", ErrSyntax},
		{"net.connect:host:127.1", "", ErrSyntax},
		{"net.connect:host:[::1]", "", ErrSyntax},
		{"net.connect:host:example.com.", "", ErrSyntax},
		{"net.connect:host:a..b", "", ErrSyntax},
		{"env:HOME_DIR", "env:HOME_DIR", nil},
		{"env:_x1", "env:_x1", nil},
		{"env:1X", "", ErrSyntax},
		{"env:A-B", "", ErrSyntax},
		{"env:A=B", "", ErrSyntax},
		{"env:", "", ErrSyntax},
		{"env:" + strings.Repeat("A", MaxNameLen+1), "", ErrSyntax},
		{"time:10s", "time:10s", nil},
		{"time:90s", "time:1m30s", nil},
		{"time:1h0m0s", "time:1h", nil},
		{"time:60m", "time:1h", nil},
		{"time:500ms", "time:500ms", nil},
		{"time:24h", "time:24h", nil},
		{"time:24h0m1s", "", ErrRange},
		{"time:0s", "", ErrRange},
		{"time:0", "", ErrRange},
		{"time:-5s", "", ErrRange},
		{"time:10", "", ErrSyntax},
		{"time:9999999999999999999h", "", ErrSyntax},
		{"output:65536", "output:64KiB", nil},
		{"output:64KiB", "output:64KiB", nil},
		{"output:1000", "output:1000", nil},
		{"output:1024MiB", "output:1GiB", nil},
		{"memory:2GiB", "memory:2GiB", nil},
		{"memory:1TiB", "memory:1TiB", nil},
		{"memory:1025GiB", "", ErrRange},
		{"memory:9223372036854775807", "", ErrRange},
		{"memory:9223372036854775808", "", ErrRange},
		{"memory:17179869184TiB", "", ErrRange},
		{"memory:0", "", ErrRange},
		{"memory:0KiB", "", ErrRange},
		{"memory:64kib", "", ErrSyntax},
		{"memory:64 KiB", "", ErrSyntax},
		{"memory:1.5GiB", "", ErrSyntax},
		{"memory:-1", "", ErrSyntax},
		{"pids:1", "pids:1", nil},
		{"pids:65536", "pids:65536", nil},
		{"pids:65537", "", ErrRange},
		{"pids:0", "", ErrRange},
		{"cpu:10s", "cpu:10s", nil},
		{"cpu:0s", "", ErrRange},
		{"cpu:25h", "", ErrRange},
		{"wasm.import:cordon/log", "wasm.import:cordon/log", nil},
		{"wasm.import:wasi_snapshot_preview1/fd_write", "wasm.import:wasi_snapshot_preview1/fd_write", nil},
		{"wasm.import:cordon", "", ErrSyntax},
		{"wasm.import:cordon/", "", ErrSyntax},
		{"wasm.import:/log", "", ErrSyntax},
		{"wasm.import:cordon/a/b", "", ErrSyntax},
		{"wasm.import:cor don/log", "", ErrSyntax},
		{"fs.read", "", ErrSyntax},
		{"", "", ErrSyntax},
		{"shell:bash", "", ErrUnknown},
		{"FS.READ:workspace", "", ErrUnknown},
		{strings.Repeat("x", MaxLen+1), "", ErrSyntax},
	} {
		c, err := Parse(tc.in)
		if tc.err != nil {
			var ce *Error
			if !errors.Is(err, tc.err) || !errors.As(err, &ce) {
				t.Errorf("Parse(%q) = %v, %v; want an *Error wrapping %v", tc.in, c, err, tc.err)
			} else if msg := err.Error(); msg != strings.ToLower(msg[:1])+msg[1:] || strings.HasSuffix(msg, ".") || len(msg) > 400 {
				t.Errorf("Parse(%q): message %q is not lowercase, ends with a period or is too long", tc.in, msg)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := c.String(); got != tc.canon {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.canon)
		}
		again, err := Parse(c.String())
		if err != nil || again != c {
			t.Errorf("canonical %q does not parse back to the same value: %v, %v", c, again, err)
		}
	}
}

func TestAccessors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want func(Capability) bool
	}{
		{"net.connect:tcp:443", func(c Capability) bool { return c.Port() == 443 && c.Name() == "" }},
		{"net.connect:host:example.com", func(c Capability) bool { return c.Port() == 0 && c.Name() == "example.com" }},
		{"net.connect:host:*.example.com:443", func(c Capability) bool { h, p := c.Host(); return c.Port() == 0 && h == "*.example.com" && p == 443 }},
		{"output:64KiB", func(c Capability) bool { return c.Size() == 64*KiB }},
		{"memory:2GiB", func(c Capability) bool { return c.Size() == 2*GiB }},
		{"time:1m30s", func(c Capability) bool { return c.Duration() == 90*time.Second }},
		{"pids:32", func(c Capability) bool { return c.Count() == 32 && c.Size() == 0 }},
		{"cpu:1m", func(c Capability) bool { return c.Duration() == time.Minute && c.Count() == 0 }},
		{"env:TOKEN", func(c Capability) bool { return c.Name() == "TOKEN" && c.Kind() == KindEnv }},
		{"wasm.import:cordon/log", func(c Capability) bool { m, n := c.Import(); return m == "cordon" && n == "log" }},
	} {
		c, err := Parse(tc.in)
		if err != nil || !tc.want(c) {
			t.Errorf("accessors of %q wrong: %+v %v", tc.in, c, err)
		}
	}
}

func TestConstructorsRefuseOutOfRange(t *testing.T) {
	if _, err := ConnectTCPPort(70000); !errors.Is(err, ErrRange) {
		t.Errorf("ConnectTCPPort(70000) = %v", err)
	}
	if _, err := TimeLimit(-time.Second); !errors.Is(err, ErrRange) {
		t.Errorf("TimeLimit(-1s) = %v", err)
	}
	if _, err := OutputLimit(-1); !errors.Is(err, ErrRange) {
		t.Errorf("OutputLimit(-1) = %v", err)
	}
	if _, err := PidsLimit(0); !errors.Is(err, ErrRange) {
		t.Errorf("PidsLimit(0) = %v", err)
	}
}

func TestSet(t *testing.T) {
	s, err := ParseSet([]string{"time:10s", "env:B", "fs.write:workspace", "env:A", "net.connect:host:a.example", "net.connect:tcp:8080", "net.connect:tcp:443", "fs.read:workspace"})
	if err != nil {
		t.Fatal(err)
	}
	want := "fs.read:workspace, fs.write:workspace, net.connect:tcp:443, net.connect:tcp:8080, net.connect:host:a.example, env:A, env:B, time:10s"
	if s.String() != want {
		t.Errorf("canonical order:\n got %s\nwant %s", s, want)
	}
	if !s.Has(WriteWorkspace()) || s.Has(HostNet()) {
		t.Error("Has is wrong")
	}
	if c, ok := s.One(KindTime); !ok || c.Duration() != 10*time.Second {
		t.Error("One(time) is wrong")
	}
	var empty Set
	if empty.Len() != 0 || empty.String() != "(none)" {
		t.Error("the zero Set is not empty")
	}

	for _, tc := range []struct {
		caps []string
		err  error
	}{
		{[]string{"net:none", "net:host"}, ErrConflict},
		{[]string{"time:10s", "time:20s"}, ErrConflict},
		{[]string{"output:1KiB", "output:2KiB"}, ErrConflict},
		{[]string{"memory:1KiB", "memory:2KiB"}, ErrConflict},
		{[]string{"pids:1", "pids:2"}, ErrConflict},
		{[]string{"cpu:1s", "cpu:2s"}, ErrConflict},
		{[]string{"net:none", "net.connect:tcp:443"}, ErrConflict},
		{[]string{"net:host", "net.connect:tcp:443"}, ErrConflict},
		{[]string{"env:A", "env:A"}, ErrDuplicate},
		{[]string{"output:65536", "output:64KiB"}, ErrDuplicate},
		{[]string{"time:10s", "bogus:x"}, ErrUnknown},
	} {
		if _, err := ParseSet(tc.caps); !errors.Is(err, tc.err) {
			t.Errorf("ParseSet(%q) = %v, want %v", tc.caps, err, tc.err)
		}
	}
	// Every problem is reported, not only the first.
	_, err = ParseSet([]string{"time:0s", "net:none", "net:host", "env:A", "env:A"})
	for _, want := range []string{"time:0s", "net:host", "env:A"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("joined error %v does not mention %s", err, want)
		}
	}
}

func TestSetJSON(t *testing.T) {
	s := MustParseSet("time:90s", "fs.read:workspace")
	data, err := s.MarshalJSON()
	if err != nil || string(data) != `["fs.read:workspace","time:1m30s"]` {
		t.Fatalf("MarshalJSON = %s, %v", data, err)
	}
	var back Set
	if err := back.UnmarshalJSON(data); err != nil || back.String() != s.String() {
		t.Fatalf("UnmarshalJSON = %v, %v", back, err)
	}
	if err := back.UnmarshalJSON([]byte(`["net:none","net:host"]`)); !errors.Is(err, ErrConflict) {
		t.Fatalf("UnmarshalJSON of a conflict = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"fs.read:workspace", "net.connect:tcp:443", "output:64KiB", "time:1m30s", "wasm.import:cordon/log", "env:X", "pids:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(c.String())
		if err != nil || again != c {
			t.Fatalf("%q parses to %q which parses to %v, %v", s, c, again, err)
		}
	})
}
