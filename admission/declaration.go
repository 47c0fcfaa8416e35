package admission

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cordon-run/cordon/capabilities"
)

// Tool kinds.
const (
	KindNative = "native"
	KindWasm   = "wasm"
)

// Limits of a declaration. Larger ones are refused, not truncated.
const (
	MaxDeclarationSize = 1 << 20 // bytes of the declaration file
	MaxDepth           = 32      // nesting of objects and arrays
	MaxNameLen         = 64
	MaxDescriptionLen  = 4096
	MaxCommandArgs     = 64
	MaxArgLen          = 4096
	MaxFiles           = 256
	MaxFileSize        = 16 << 20 // bytes of one file a tool brings
	MaxFilesSize       = 64 << 20 // bytes of all of them
	MaxCapabilities    = 64
	MaxSchemaSize      = 256 << 10 // bytes of input_schema
)

// Declaration is a tool as a model declares it: what it is, what it runs,
// what it asks for. It is decoded strictly by [Decode] (JSON or YAML) and
// checked by [Declaration.Validate].
type Declaration struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Kind         string          `json:"kind"`                // "native" or "wasm"
	Substrate    string          `json:"substrate,omitempty"` // native: "bwrap" (the default), "landlock" or "oci"
	Command      []string        `json:"command,omitempty"`   // native: the program and its arguments
	Module       string          `json:"module,omitempty"`    // wasm: the module, relative to the declaration
	Args         []string        `json:"args,omitempty"`      // wasm: fixed arguments after the tool's name in the module's argv
	Files        []string        `json:"files,omitempty"`     // native: files the tool brings, relative to the declaration
	Capabilities []string        `json:"capabilities"`        // required; [] asks for nothing
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
}

// nativeSubstrates are what a native tool's substrate may say ("" is
// bwrap).
var nativeSubstrates = []string{"", "bwrap", "landlock", "oci"}

// fields lists the declaration's JSON fields and the type each takes, for
// strict decoding and for messages.
var fields = map[string]string{
	"name":         "a string",
	"description":  "a string",
	"kind":         "a string",
	"substrate":    "a string",
	"command":      "an array of strings",
	"module":       "a string",
	"args":         "an array of strings",
	"files":        "an array of strings",
	"capabilities": "an array of strings",
	"input_schema": "an object",
}

func fieldList() string {
	return "name, description, kind, substrate, command, module, args, files, capabilities, input_schema"
}

// String summarises the declaration for messages and logs.
func (d *Declaration) String() string {
	what := d.Module
	if d.Kind == KindNative {
		what = strings.Join(d.Command, " ")
	}
	return fmt.Sprintf("%s tool %q (%s) asking for [%s]", d.Kind, d.Name, what, strings.Join(d.Capabilities, ", "))
}

// Validate checks everything about the declaration that does not need the
// host: names, kinds, paths, sizes, the capability list. Every problem is
// one [Reason]; the result is nil when there are none.
func (d *Declaration) Validate() []Reason {
	var rs []Reason
	bad := func(field, instead, format string, args ...any) {
		rs = append(rs, Reason{Check: "validate", Field: field, Err: ErrInvalidDeclaration, Blocked: fmt.Sprintf(format, args...), Instead: instead})
	}
	switch {
	case d.Name == "":
		bad("name", "a name such as \"count-lines\"", "name is required")
	case !validName(d.Name):
		bad("name", "a name such as \"count-lines\"", "name %q must be 1 to %d characters of a-z, 0-9, '-' and '_', starting with a letter or digit", shorten(d.Name), MaxNameLen)
	}
	if len(d.Description) > MaxDescriptionLen {
		bad("description", "", "description is longer than %d bytes", MaxDescriptionLen)
	}
	switch d.Kind {
	case KindNative:
		if len(d.Command) == 0 {
			bad("command", "\"command\": [\"python3\", \"tool.py\"]", "a native tool needs a command")
		}
		if len(d.Command) > MaxCommandArgs {
			bad("command", "", "command has more than %d elements", MaxCommandArgs)
		}
		for i, a := range d.Command {
			if a == "" && i == 0 || len(a) > MaxArgLen || strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
				bad("command", "", "command[%d] must be non-empty UTF-8 text without NUL, at most %d bytes", i, MaxArgLen)
			}
		}
		if d.Module != "" {
			bad("module", "command", "module belongs to wasm tools; a native tool names its program in command")
		}
		if !slices.Contains(nativeSubstrates, d.Substrate) {
			bad("substrate", "\"substrate\": \"bwrap\", \"landlock\" or \"oci\"", "substrate %q runs no native tool", shorten(d.Substrate))
		}
		if len(d.Args) > 0 {
			bad("args", "command", "args belong to wasm tools; a native tool gives its arguments in command")
		}
	case KindWasm:
		if d.Module == "" {
			bad("module", "\"module\": \"tool.wasm\"", "a wasm tool needs a module")
		} else if reason := checkRelPath(d.Module); reason != "" {
			bad("module", "a path relative to the declaration's folder", "module %q: %s", shorten(d.Module), reason)
		}
		if len(d.Command) > 0 {
			bad("command", "module", "command belongs to native tools; a wasm tool names its module")
		}
		if len(d.Files) > 0 {
			bad("files", "module", "files belong to native tools; a wasm tool brings its module")
		}
		if d.Substrate != "" && d.Substrate != KindWasm {
			bad("substrate", "no substrate (a wasm tool runs on wazero)", "substrate belongs to native tools")
		}
		if len(d.Args) > MaxCommandArgs-1 {
			bad("args", "", "args has more than %d elements", MaxCommandArgs-1)
		}
		for i, a := range d.Args {
			if len(a) > MaxArgLen || strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
				bad("args", "", "args[%d] must be UTF-8 text without NUL, at most %d bytes", i, MaxArgLen)
			}
		}
	case "":
		bad("kind", "\"kind\": \"native\" or \"kind\": \"wasm\"", "kind is required")
	default:
		bad("kind", "\"kind\": \"native\" or \"kind\": \"wasm\"", "unknown kind %q", shorten(d.Kind))
	}
	if len(d.Files) > MaxFiles {
		bad("files", "", "more than %d files", MaxFiles)
	}
	seen := map[string]bool{}
	for _, f := range d.Files {
		if reason := checkRelPath(f); reason != "" {
			bad("files", "a path relative to the declaration's folder", "file %q: %s", shorten(f), reason)
			continue
		}
		clean := path.Clean(f)
		if seen[clean] {
			bad("files", "", "file %q is listed twice", shorten(f))
		}
		seen[clean] = true
	}
	if d.Capabilities == nil {
		bad("capabilities", "\"capabilities\": [] for a tool that needs nothing", "capabilities is required")
	}
	if len(d.Capabilities) > MaxCapabilities {
		bad("capabilities", "", "more than %d capabilities", MaxCapabilities)
	}
	if len(d.InputSchema) > MaxSchemaSize {
		bad("input_schema", "", "input_schema is larger than %d bytes", MaxSchemaSize)
	}
	return rs
}

func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || i > 0 && (b == '-' || b == '_')) {
			return false
		}
	}
	return true
}

// checkRelPath returns why p is not a clean relative path that stays in
// its folder, or "".
func checkRelPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > 1024:
		return "longer than 1024 bytes"
	case strings.ContainsRune(p, 0) || !utf8.ValidString(p):
		return "not valid UTF-8 text without NUL"
	case strings.HasPrefix(p, "/"):
		return "absolute; paths are relative to the declaration's folder"
	case strings.ContainsRune(p, '\\'):
		return "contains a backslash; separate folders with '/'"
	}
	clean := path.Clean(p)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "leaves the declaration's folder"
	}
	return ""
}

// shorten bounds text quoted back in messages.
func shorten(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// parseCapabilities parses the declaration's capability list; each string
// that does not parse, and each duplicate or conflict, is one Reason.
func (d *Declaration) parseCapabilities() (capabilities.Set, []Reason) {
	var rs []Reason
	var caps []capabilities.Capability
	for _, s := range d.Capabilities {
		c, err := capabilities.Parse(s)
		if err != nil {
			rs = append(rs, capabilityReason("capabilities", s, err))
			continue
		}
		caps = append(caps, c)
	}
	set, err := capabilities.NewSet(caps...)
	if err != nil {
		for _, e := range unjoin(err) {
			var ce *capabilities.Error
			input := ""
			if asCapErr(e, &ce) {
				input = ce.Input
			}
			rs = append(rs, capabilityReason("capabilities", input, e))
		}
		set = bestSet(caps)
	}
	return set, rs
}

// bestSet keeps, in order, each capability that does not clash with those
// kept before it, so that later checks can still report on them.
func bestSet(caps []capabilities.Capability) capabilities.Set {
	var keep []capabilities.Capability
	for _, c := range caps {
		if _, err := capabilities.NewSet(append(keep, c)...); err == nil {
			keep = append(keep, c)
		}
	}
	set, _ := capabilities.NewSet(keep...)
	return set
}
