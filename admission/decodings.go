//go:build !cordon_front

package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"reflect"
	"strings"
	"sync"

	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/wasm"
	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// This file holds what cordon's front end (the build tag cordon_front)
// does not link: the wasm substrate, the YAML decoder and the JSON-schema
// validator. The front end hands every command that needs them to the
// full binary; decodings_front.go says so where they would be used.

// addDefaultWasm adds the wasm substrate to the default substrates.
func addDefaultWasm(m map[string]substrate.Enforcer) { m[KindWasm] = wasm.Enforcer{} }

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

// maxYAMLNodes bounds the nodes of a YAML declaration.
const maxYAMLNodes = 100000

// yamlToJSON reads one YAML document into a node tree, refuses what JSON
// cannot say or what could multiply its size (aliases, merge keys, custom
// tags, non-string keys, duplicate keys), and returns it as JSON.
func yamlToJSON(data []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &DecodeError{Format: FormatYAML, Reason: "empty input; a declaration is a mapping"}
		}
		return nil, &DecodeError{Format: FormatYAML, Reason: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, &DecodeError{Format: FormatYAML, Reason: "more than one YAML document; a declaration is one"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &DecodeError{Format: FormatYAML, Reason: "the declaration must be a mapping"}
	}
	count := 0
	v, err := yamlValue(doc.Content[0], 1, &count)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func yamlValue(n *yaml.Node, depth int, count *int) (any, error) {
	fail := func(format string, args ...any) error {
		return &DecodeError{Format: FormatYAML, Line: n.Line, Reason: fmt.Sprintf(format, args...)}
	}
	*count++
	if *count > maxYAMLNodes {
		return nil, fail("more than %d values", maxYAMLNodes)
	}
	if depth > MaxDepth {
		return nil, fail("nested deeper than %d levels", MaxDepth)
	}
	if n.Anchor != "" {
		return nil, fail("anchors and aliases are not accepted (&%s)", shorten(n.Anchor))
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, fail("anchors and aliases are not accepted (*%s)", shorten(n.Value))
	case yaml.MappingNode:
		if n.Tag != "!!map" {
			return nil, fail("tag %s is not accepted", shorten(n.Tag))
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
				if k.Tag == "!!merge" {
					return nil, &DecodeError{Format: FormatYAML, Line: k.Line, Reason: "merge keys (<<) are not accepted"}
				}
				return nil, &DecodeError{Format: FormatYAML, Line: k.Line, Reason: "mapping keys must be strings"}
			}
			if _, dup := m[k.Value]; dup {
				return nil, &DecodeError{Format: FormatYAML, Line: k.Line, Reason: fmt.Sprintf("duplicate key %q", shorten(k.Value))}
			}
			val, err := yamlValue(v, depth+1, count)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		if n.Tag != "!!seq" {
			return nil, fail("tag %s is not accepted", shorten(n.Tag))
		}
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := yamlValue(c, depth+1, count)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fail("%s", strings.TrimPrefix(err.Error(), "yaml: "))
			}
			if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				return nil, fail("%s cannot be said in JSON", n.Value)
			}
			return v, nil
		}
		return nil, fail("tag %s is not accepted", shorten(n.Tag))
	}
	return nil, fail("unexpected YAML node")
}
