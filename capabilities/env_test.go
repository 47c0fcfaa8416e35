package capabilities

import (
	"strings"
	"testing"
)

func TestEnvHazard(t *testing.T) {
	for _, name := range []string{"LD_PRELOAD", "ld_preload", "Ld_Audit", "BASH_ENV", "ENV", "PATH", "HOME", "GIT_SSH_COMMAND",
		"PYTHONPATH", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "BASH_FUNC_x%%", "GLIBC_TUNABLES", "IFS", "PS4", "DYLD_INSERT_LIBRARIES", "LC_ALL", "CORDON_X"} {
		why := EnvHazard(name)
		if why == "" || !strings.HasPrefix(why, name+" cannot be granted") {
			t.Errorf("EnvHazard(%q) = %q, want a refusal naming it", name, why)
		}
	}
	for _, name := range []string{"MY_TOKEN", "GOPROXY", "CI", "TERM_PROGRAM_X", "_X", "x1"} {
		if why := EnvHazard(name); why != "" {
			t.Errorf("EnvHazard(%q) = %q, want none", name, why)
		}
	}
}
