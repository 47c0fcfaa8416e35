//go:build !cordon_front

package admission

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// This file is one of the three that cordon's front end (the build tag
// cordon_front) leaves out, for the initialisation its dependency costs
// every process (docs/architecture.md); front.go stands in for them there.

// CompileSchema compiles a tool's input_schema with google/jsonschema-go:
// draft 2020-12, or draft-07 when "$schema" says so; any other "$schema"
// is refused. The schema first passes cordon's rules ([SchemaRules]),
// whose every problem is reported in one [*SchemaError]. References are
// resolved within the schema only: there is no loader, so a "$ref" to
// another document is an error. An empty schema means the tool takes no
// input: only {} is valid.
func CompileSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object","additionalProperties":false}`)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("input_schema is not JSON: %v", err)
	}
	d, err := newSchemaDoc(doc)
	if err != nil {
		return nil, err
	}
	var se SchemaError
	for _, r := range schemaRules {
		r.check(d, func(n *schemaNode, format string, args ...any) {
			se.Problems = append(se.Problems, "input_schema#"+n.ptr+": "+fmt.Sprintf(format, args...))
		})
	}
	if len(se.Problems) > 0 {
		return nil, &se
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input_schema does not compile: %s", oneLine(err.Error()))
	}
	s.Schema = d.draft // the validator knows one spelling of each
	rs, err := resolveSchema(&s)
	if err != nil {
		return nil, fmt.Errorf("input_schema does not compile: %s", oneLine(err.Error()))
	}
	return rs, nil
}

// resolveSchema resolves s without a loader; a panic in the validator
// becomes an error.
func resolveSchema(s *jsonschema.Schema) (rs *jsonschema.Resolved, err error) {
	defer func() {
		if p := recover(); p != nil {
			rs, err = nil, fmt.Errorf("the validator failed on it: %v", p)
		}
	}()
	return s.Resolve(&jsonschema.ResolveOptions{Loader: noLoader})
}

// noLoader refuses every URL: schemas are resolved without a network or a
// file system.
func noLoader(u *url.URL) (*jsonschema.Schema, error) {
	return nil, fmt.Errorf("refusing to load %q: input schemas cannot refer to other documents", shorten(u.String()))
}

// compileSchema compiles an input_schema ([CompileSchema]) and returns
// its check of an input value.
func compileSchema(raw json.RawMessage) (func(v any) error, error) {
	rs, err := CompileSchema(raw)
	if err != nil {
		return nil, err
	}
	return func(v any) error { return validate(rs, v) }, nil
}

// validate validates v against rs; a panic in the validator is an error.
func validate(rs *jsonschema.Resolved, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the validator failed: %v", p)
		}
	}()
	return rs.Validate(v)
}

// keywords are the keys google/jsonschema-go reads into its Schema type;
// encoding/json matches them without regard to case.
var keywords = sync.OnceValue(func() []string {
	kws := []string{"type", "items", "dependencies"} // read by hand
	t := reflect.TypeFor[jsonschema.Schema]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			kws = append(kws, name)
		}
	}
	return kws
})
