package capabilities

import (
	"fmt"
	"strings"
)

// hazardousEnv lists environment variables that change how programs load,
// what they run, or where they look for code and configuration, and those a
// sandbox sets itself. Neither admission (env:NAME) nor cordon exec
// (--env NAME) passes them: a tool that received the caller's value could
// run code its grant does not name.
var hazardousEnv = map[string]string{
	"PATH":                  "it decides which program a name runs; the sandbox sets its own PATH",
	"HOME":                  "tools get an empty HOME of their own; the real one is hidden",
	"IFS":                   "it changes how shells split words",
	"PS4":                   "shells expand it, running commands, when tracing",
	"ENV":                   "shells run the file it names at start",
	"BASH_ENV":              "bash runs the file it names at start",
	"SHELLOPTS":             "it turns on shell options in every bash",
	"BASHOPTS":              "it turns on shell options in every bash",
	"PROMPT_COMMAND":        "bash runs it",
	"CDPATH":                "it changes where cd goes",
	"GLOBIGNORE":            "it changes how shells expand globs",
	"SHELL":                 "programs run the shell it names",
	"EDITOR":                "programs run the editor it names",
	"VISUAL":                "programs run the editor it names",
	"PAGER":                 "programs run the pager it names",
	"MANPAGER":              "programs run the pager it names",
	"BROWSER":               "programs run the browser it names",
	"LESSOPEN":              "less runs the command it names",
	"LESSCLOSE":             "less runs the command it names",
	"TMPDIR":                "tools get a fresh /tmp of their own",
	"GCONV_PATH":            "glibc loads code from the folder it names",
	"GLIBC_TUNABLES":        "it changes how glibc's loader and allocator behave",
	"LOCPATH":               "glibc loads locale data from the folder it names",
	"NLSPATH":               "programs load message catalogues from it",
	"HOSTALIASES":           "the resolver reads the file it names",
	"RESOLV_HOST_CONF":      "the resolver reads the file it names",
	"LOCALDOMAIN":           "it changes how host names resolve",
	"RES_OPTIONS":           "it changes how host names resolve",
	"OPENSSL_CONF":          "OpenSSL loads engines and providers the file names",
	"OPENSSL_ENGINES":       "OpenSSL loads code from the folder it names",
	"OPENSSL_MODULES":       "OpenSSL loads code from the folder it names",
	"CLASSPATH":             "Java loads classes from it",
	"JAVA_TOOL_OPTIONS":     "the JVM takes options (agents) from it",
	"_JAVA_OPTIONS":         "the JVM takes options (agents) from it",
	"JDK_JAVA_OPTIONS":      "the JVM takes options (agents) from it",
	"TCLLIBPATH":            "Tcl loads code from it",
	"LUA_PATH":              "Lua loads code from it",
	"LUA_CPATH":             "Lua loads code from it",
	"GOFLAGS":               "the go command takes flags from it",
	"CARGO_HOME":            "cargo runs code from the folder it names",
	"RUSTC_WRAPPER":         "cargo runs the program it names",
	"SSH_ASKPASS":           "ssh runs the program it names",
	"SUDO_ASKPASS":          "sudo runs the program it names",
	"GIT_ASKPASS":           "git runs the program it names",
	"XDG_CONFIG_HOME":       "programs read their configuration from the folder it names",
	"XDG_CONFIG_DIRS":       "programs read their configuration from the folders it names",
	"XDG_DATA_DIRS":         "programs load data and plug-ins from the folders it names",
	"MAKEFLAGS":             "make takes options from it",
	"TERMINFO":              "programs load terminal descriptions from it",
	"INPUTRC":               "readline reads the file it names",
	"ZDOTDIR":               "zsh runs start-up files from the folder it names",
	"PERLLIB":               "perl loads modules from it",
	"PROMPT":                "shells expand it",
	"HISTFILE":              "shells write history to the file it names",
	"LD_LIBRARY_PATH":       "the dynamic loader loads libraries from it",
	"LD_PRELOAD":            "the dynamic loader loads the libraries it names into every program",
	"DYLD_INSERT_LIBRARIES": "the dynamic loader loads the libraries it names into every program",
}

// hazardousEnvPrefixes lists families of variables refused the same way.
var hazardousEnvPrefixes = []struct{ prefix, why string }{
	{"LD_", "the dynamic loader takes LD_* variables (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT) to load code"},
	{"DYLD_", "the dynamic loader takes DYLD_* variables to load code"},
	{"MALLOC_", "glibc's allocator takes MALLOC_* variables"},
	{"GIT_", "git takes GIT_* variables to run programs and choose repositories (GIT_SSH_COMMAND, GIT_DIR, GIT_CONFIG_*)"},
	{"PYTHON", "Python takes PYTHON* variables to load code (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME)"},
	{"NODE_", "Node takes NODE_* variables to load code (NODE_OPTIONS, NODE_PATH)"},
	{"NPM_CONFIG_", "npm takes NPM_CONFIG_* variables to run scripts and choose registries"},
	{"PERL5", "perl takes PERL5* variables to load code (PERL5LIB, PERL5OPT)"},
	{"RUBY", "Ruby takes RUBY* variables to load code (RUBYOPT, RUBYLIB)"},
	{"GEM_", "Ruby takes GEM_* variables to load code"},
	{"BUNDLE_", "bundler takes BUNDLE_* variables to load code"},
	{"BASH_FUNC_", "bash imports functions from BASH_FUNC_* variables"},
	{"LC_", "glibc loads locale data chosen by LC_* variables; tools run in the C.UTF-8 locale"},
	{"LANG", "glibc loads locale data chosen by LANG and LANGUAGE; tools run in the C.UTF-8 locale"},
	{"CORDON_", "CORDON_* variables belong to cordon itself"},
}

// EnvHazard returns why the environment variable name must not be passed
// to a tool — it changes how programs load or what they run, or the
// sandbox sets it itself — or "" when it may be. Names are compared without
// regard to case, so that no spelling slips through on a system or in a
// program that folds case. It is the one list behind env:NAME in admission
// and --env NAME in cordon exec.
func EnvHazard(name string) string {
	upper := strings.ToUpper(name)
	if why, ok := hazardousEnv[upper]; ok {
		return fmt.Sprintf("%s cannot be granted to a tool: %s", name, why)
	}
	for _, p := range hazardousEnvPrefixes {
		if strings.HasPrefix(upper, p.prefix) {
			return fmt.Sprintf("%s cannot be granted to a tool: %s", name, p.why)
		}
	}
	return ""
}
