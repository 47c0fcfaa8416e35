package admission

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/refusal"
)

func TestCheckInput(t *testing.T) {
	tool := func(schema string) *Tool {
		d := &Declaration{Name: "t", Kind: KindNative, Command: []string{"true"}, Capabilities: []string{}}
		if schema != "" {
			d.InputSchema = []byte(schema)
		}
		return &Tool{Declaration: d}
	}
	withSchema := tool(`{"type": "object", "properties": {"glob": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}}, "required": ["glob"], "additionalProperties": false}`)
	for _, tc := range []struct {
		tool  *Tool
		input string
		want  string // the stdin the tool gets, or "" when refused
		says  string // what the refusal says
	}{
		{withSchema, `{"glob": "*.go"}`, `{"glob": "*.go"}`, ""},
		{withSchema, ` { "glob" : "*.go", "n": 3 } `, ` { "glob" : "*.go", "n": 3 } `, ""}, // exactly as given
		{withSchema, `{"glob": 5}`, "", `input_schema#/properties/glob: type: 5 has type "integer", want "string"`},
		{withSchema, `{}`, "", `required: missing properties: ["glob"]`},
		{withSchema, ``, "", `required: missing properties: ["glob"]`},
		{withSchema, `{"glob": "*.go", "extra": 1}`, "", `unexpected additional properties ["extra"]`},
		{withSchema, `{"glob": "much-too-long"}`, "", "input_schema#/properties/glob: maxLength"},
		{withSchema, `{"glob": "a", "glob": "b"}`, "", "duplicate key \"glob\""},
		{withSchema, `{"glob": "a"} {}`, "", "data after the first JSON value"},
		{withSchema, `{"glob": "a"`, "", "not strict JSON"},
		{withSchema, `{"glob": "` + strings.Repeat("a", MaxInputSize) + `"}`, "", "larger than"},
		{tool(""), ``, "{}", ""},
		{tool(""), `{}`, "{}", ""},
		{tool(""), "{}\n", "{}\n", ""},
		{tool(""), `{"a": 1}`, "", `unexpected additional properties ["a"]`},
		{tool(`{"type": "array"}`), `[1, 2]`, "[1, 2]", ""},
	} {
		got, err := tc.tool.CheckInput([]byte(tc.input))
		if tc.says == "" {
			if err != nil || string(got) != tc.want {
				t.Errorf("CheckInput(%.40q) = %q, %v; want %q", tc.input, got, err, tc.want)
			}
			continue
		}
		var ie *InputError
		if err == nil || !errors.As(err, &ie) || !errors.Is(err, ErrInputRefused) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("CheckInput(%.40q) = %v; want an *InputError saying %q", tc.input, err, tc.says)
			continue
		}
		if k := refusal.Of(err); k == nil || !(k.Class() == refusal.Policy) || k.Name() != "InputRefused" {
			t.Errorf("kind %v", k)
		}
	}
}

// TestSelfReferentialSchemas: a schema that applies itself to the same
// value (a model can write one by mistake or on purpose) is refused at
// admission; the validator would recurse until the process died. A schema
// that refers to itself through properties or items, descending into the
// value, is accepted and validates.
func TestSelfReferentialSchemas(t *testing.T) {
	for _, schema := range []string{
		`{"$ref": "#"}`,
		`{"allOf": [{"$ref": "#"}]}`,
		`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`,
	} {
		_, err := CompileSchema([]byte(schema))
		if err == nil || !strings.Contains(err.Error(), "in a loop") {
			t.Errorf("%s: compiled (%v), want a refusal naming the loop", schema, err)
		}
	}
	tree := `{"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}`
	tool := &Tool{Declaration: &Declaration{Name: "t", Kind: KindNative, Command: []string{"true"}, InputSchema: []byte(tree)}}
	if _, err := tool.CheckInput([]byte(`{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}`)); err != nil {
		t.Errorf("a tree: %v", err)
	}
	if _, err := tool.CheckInput([]byte(`{"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]}`)); !errors.Is(err, ErrInputRefused) {
		t.Errorf("a tree with a bad leaf: %v, want a refusal", err)
	}
}
