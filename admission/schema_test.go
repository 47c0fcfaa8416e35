package admission

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestSchemaRules replays, for every schema rule, schemas it refuses and
// schemas it lets through. Each refused schema is first shown to resolve
// with google/jsonschema-go alone: the rule, not the library, refuses it.
func TestSchemaRules(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		schema  string
		refused string // what the problem says; "" when the schema compiles
	}{
		{"draft", `{"$schema": "http://json-schema.org/draft-04/schema#"}`, `is not a draft cordon validates`},
		{"draft", `{"$schema": "https://json-schema.org/draft/2019-09/schema"}`, `is not a draft cordon validates`},
		{"draft", `{"properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}}`, `"$schema" is accepted only at the root`},
		{"draft", `{"$schema": "https://json-schema.org/draft/2020-12/schema"}`, ""},
		{"draft", `{"$schema": "https://json-schema.org/draft/2020-12/schema#"}`, ""},
		{"draft", `{"$schema": "http://json-schema.org/draft-07/schema#"}`, ""},
		{"draft", `{"$schema": "https://json-schema.org/draft-07/schema"}`, ""},

		{"draft-keywords", `{"items": [{"type": "string"}]}`, `"items" is a list`},
		{"draft-keywords", `{"prefixItems": [{"type": "string"}], "additionalItems": false}`, `"additionalItems" is a draft-07 keyword`},
		{"draft-keywords", `{"dependencies": {"a": ["b"]}}`, `"dependencies" is a draft-07 keyword`},
		{"draft-keywords", `{"$schema": "http://json-schema.org/draft-07/schema#", "dependentRequired": {"a": ["b"]}}`, `"dependentRequired" is a draft 2020-12 keyword`},
		{"draft-keywords", `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": false, "dependencies": {"a": ["b"]}}`, ""},
		{"draft-keywords", `{"prefixItems": [{"type": "string"}], "items": false, "dependentRequired": {"a": ["b"]}}`, ""},

		{"ids", `{"$defs": {"a": {"$id": "https://example.com/a.json"}}}`, `"$id" is accepted only at the root`},
		{"ids", `{"$id": "https://example.com/s.json", "$defs": {"a": {"type": "string"}}, "properties": {"a": {"$ref": "https://example.com/s.json#/$defs/a"}}}`, ""},
		{"ids", `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"$id": "#a", "type": "string"}}, "properties": {"x": {"$ref": "#a"}}}`, ""},

		{"keyword-case", `{"type": "object", "Required": ["a"]}`, `"Required" would be read as the keyword "required"`},
		{"keyword-case", `{"properties": {"a": {"Type": "integer", "type": "string"}}}`, `"Type" would be read as the keyword "type"`},
		{"keyword-case", `{"properties": {"Type": {"type": "string"}, "x-note": {}}}`, ""},

		{"type-names", `{"type": "strng"}`, `"type": "strng" is not a JSON type`},
		{"type-names", `{"type": ["string", "int"]}`, `"type": "int" is not a JSON type`},
		{"type-names", `{"properties": {"a": {"type": "float"}}}`, `input_schema#/properties/a: "type": "float"`},
		{"type-names", `{"type": ["array", "boolean", "integer", "null", "number", "object", "string"]}`, ""},

		{"counts", `{"minLength": -1}`, `"minLength" is -1`},
		{"counts", `{"items": {"maxItems": -3}}`, `input_schema#/items: "maxItems" is -3`},
		{"counts", `{"contains": {}, "minContains": -1}`, `"minContains" is -1`},
		{"counts", `{"minProperties": -1}`, `"minProperties" is -1`},
		{"counts", `{"minLength": 0, "maxLength": 0, "minItems": 0, "maxItems": 0, "minProperties": 0, "maxProperties": 0, "contains": {}, "minContains": 0, "maxContains": 0}`, ""},

		{"multiple-of", `{"multipleOf": 0}`, `"multipleOf" is 0`},
		{"multiple-of", `{"multipleOf": -2}`, `"multipleOf" is -2`},
		{"multiple-of", `{"multipleOf": 0.01}`, ""},

		{"no-loops", `{"$ref": "#"}`, `in a loop (# → #)`},
		{"no-loops", `{"not": {"$ref": "#"}}`, `in a loop (# → #/not → #)`},
		{"no-loops", `{"if": {"$ref": "#"}}`, `in a loop`},
		{"no-loops", `{"if": true, "then": {"$ref": "#"}}`, `in a loop`},
		{"no-loops", `{"if": false, "else": {"$ref": "#"}}`, `in a loop`},
		{"no-loops", `{"oneOf": [{"type": "string"}, {"$ref": "#"}]}`, `in a loop`},
		{"no-loops", `{"dependentSchemas": {"a": {"$ref": "#"}}}`, `in a loop`},
		{"no-loops", `{"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": {"$ref": "#"}}}`, `in a loop`},
		{"no-loops", `{"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}`, `in a loop (#/$defs/a → #/$defs/a)`},
		{"no-loops", `{"$defs": {"a~b/c": {"$ref": "#/$defs/a~0b~1c"}}}`, `in a loop`},
		{"no-loops", `{"$defs": {"a b": {"$ref": "#/$defs/a%20b"}}}`, `in a loop`},
		{"no-loops", `{"$id": "https://example.com/s.json", "allOf": [{"$ref": "https://example.com/s.json"}]}`, `in a loop`},
		{"no-loops", `{"$id": "https://example.com/s.json", "allOf": [{"$ref": "s.json#"}]}`, `in a loop`},
		{"no-loops", `{"$dynamicAnchor": "n", "anyOf": [{"$dynamicRef": "#n"}]}`, `in a loop`},
		{"no-loops", `{"$defs": {"n": {"$anchor": "n", "allOf": [{"$ref": "#n"}]}}}`, `in a loop`},
		{"no-loops", `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"n": {"$id": "#n", "allOf": [{"$ref": "#n"}]}}}`, `in a loop`},
		{"no-loops", `{"properties": {"a": {"$ref": "#"}}, "items": {"$ref": "#"}, "additionalProperties": {"$ref": "#"}, "propertyNames": {"$ref": "#/$defs/s"}, "$defs": {"s": {"type": "string"}}}`, ""},
		{"no-loops", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "string"}}, "allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}`, ""},
		{"no-loops", `{"$dynamicAnchor": "n", "type": "object", "additionalProperties": {"$dynamicRef": "#n"}}`, ""},
	} {
		_, err := CompileSchema([]byte(tc.schema))
		if tc.refused == "" {
			if err != nil {
				t.Errorf("%s: %s: %v, want it compiled", tc.rule, tc.schema, err)
			}
			continue
		}
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s: %s: %v, want a *SchemaError saying %q", tc.rule, tc.schema, err, tc.refused)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(tc.schema), &s); err != nil {
			t.Errorf("%s: %s: the library does not read it: %v", tc.rule, tc.schema, err)
			continue
		}
		s.Schema = ""
		if _, err := s.Resolve(nil); err != nil && !strings.Contains(tc.schema, "$schema") {
			t.Errorf("%s: %s: the library alone refuses it (%v): the case does not test the rule", tc.rule, tc.schema, err)
		}
	}
}

// TestSchemaRulesListed: every rule is documented by SchemaRules.
func TestSchemaRulesListed(t *testing.T) {
	got := SchemaRules()
	if len(got) != len(schemaRules) {
		t.Fatalf("SchemaRules() has %d entries, want %d", len(got), len(schemaRules))
	}
	for i, r := range schemaRules {
		if r.Name == "" || r.Summary == "" || r.check == nil || !strings.HasPrefix(got[i], r.Name+": ") {
			t.Errorf("rule %d: %+v", i, r)
		}
	}
}

// FuzzSchema compiles arbitrary schemas and validates arbitrary input
// against those that compile: neither may panic, crash or fail to return
// (a loop the rules miss would overflow the stack and kill the fuzzer).
func FuzzSchema(f *testing.F) {
	files, _ := filepath.Glob("testdata/decls/*.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var d struct {
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal(data, &d) == nil && len(d.InputSchema) > 0 {
			f.Add([]byte(d.InputSchema), []byte(`{"a": [1, {"b": "c"}], "n": 2}`))
		}
	}
	f.Add([]byte(`{"$ref": "#"}`), []byte(`{}`))
	f.Add([]byte(`{"$dynamicAnchor": "n", "anyOf": [{"$dynamicRef": "#n"}]}`), []byte(`[]`))
	f.Add([]byte(`{"$id": "https://e.com/s", "$defs": {"a": {"$anchor": "a", "allOf": [{"$ref": "s#a"}]}}}`), []byte(`1`))
	f.Fuzz(func(t *testing.T, schema, input []byte) {
		if len(schema) > 1<<12 || len(input) > 1<<12 {
			return
		}
		if _, err := CompileSchema(schema); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		tool := &Tool{Declaration: &Declaration{Name: "t", Kind: KindNative, Command: []string{"true"}, InputSchema: schema}}
		out, err := tool.CheckInput(input)
		if err != nil && !errors.Is(err, ErrInputRefused) {
			t.Fatalf("CheckInput: %T %v", err, err)
		}
		if err == nil && len(out) == 0 {
			t.Fatal("accepted input, empty stdin")
		}
	})
}
