package substrate

import (
	"errors"
	"testing"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/refusal"
)

func TestFactsDigest(t *testing.T) {
	a := Facts{Substrate: "bwrap", OS: "linux", Arch: "amd64", Kernel: "6.1", UID: 0,
		Values: map[string]string{"bwrap.version": "0.8.0", "landlock.abi": "4"}}
	b := a
	b.Values = map[string]string{"landlock.abi": "4", "bwrap.version": "0.8.0"}
	if a.Digest() != b.Digest() {
		t.Error("equal facts have different digests")
	}
	for _, change := range []func(*Facts){
		func(f *Facts) { f.Kernel = "6.2" },
		func(f *Facts) { f.UID = 1000 },
		func(f *Facts) { f.Values = map[string]string{"bwrap.version": "0.9.0", "landlock.abi": "4"} },
		func(f *Facts) { f.Substrate = "landlock" },
	} {
		c := a
		change(&c)
		if c.Digest() == a.Digest() {
			t.Errorf("changed facts %v keep the digest of %v", c, a)
		}
	}
	if got, want := a.String(), "bwrap on linux/amd64, kernel 6.1, uid 0, bwrap.version=0.8.0, landlock.abi=4"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestHostFacts(t *testing.T) {
	f, err := HostFacts("test")
	if err != nil {
		t.Fatal(err)
	}
	if f.Kernel == "" || f.OS == "" {
		t.Errorf("host facts incomplete: %v", f)
	}
}

func TestUnenforceableError(t *testing.T) {
	c, _ := capabilities.Parse("net.connect:tcp:443")
	err := error(&UnenforceableError{Substrate: "bwrap", Capability: c,
		Reason: "bwrap can only unshare the network entirely", Instead: []string{"net:none", "net:host"}})
	if !errors.Is(err, ErrUnenforceable) || !(refusal.Of(err).Class() == refusal.Policy) {
		t.Errorf("%v is not a policy refusal", err)
	}
	want := "cannot grant net.connect:tcp:443: bwrap can only unshare the network entirely; ask for net:none or net:host instead"
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
}
