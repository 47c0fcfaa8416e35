package runtime_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoFrontEndDependencies keeps the CLI framework and the front end out
// of the runtime and the substrates (they are libraries that other front
// ends embed). It needs the go command and the module's sources, so it
// runs where the suite is run from the source tree.
func TestNoFrontEndDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/cordon-run/cordon/runtime", "github.com/cordon-run/cordon/substrate/...").Output()
	if err != nil {
		t.Skipf("go list is not available here (%v); the run from the source tree checks this", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, forbidden := range []string{"github.com/spf13/pflag", "github.com/cordon-run/cordon/cmd/"} {
			if strings.HasPrefix(dep, forbidden) {
				t.Errorf("runtime or a substrate depends on %s", dep)
			}
		}
	}
}
