package admission

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/refusal"
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
		{withSchema, `{"glob": "*.go"}`, "{\"glob\":\"*.go\"}\n", ""},
		{withSchema, ` { "glob" : "*.go", "n": 3 } `, "{\"glob\":\"*.go\",\"n\":3}\n", ""},
		{withSchema, `{"glob": 5}`, "", "at /glob: got number, want string"},
		{withSchema, `{}`, "", "missing property 'glob'"},
		{withSchema, ``, "", "missing property 'glob'"},
		{withSchema, `{"glob": "*.go", "extra": 1}`, "", "additional properties 'extra' not allowed"},
		{withSchema, `{"glob": "much-too-long"}`, "", "at /glob"},
		{withSchema, `{"glob": "a", "glob": "b"}`, "", "duplicate key \"glob\""},
		{withSchema, `{"glob": "a"} {}`, "", "data after the first JSON value"},
		{withSchema, `{"glob": "a"`, "", "not strict JSON"},
		{withSchema, `{"glob": "` + strings.Repeat("a", MaxInputSize) + `"}`, "", "larger than"},
		{tool(""), ``, "{}\n", ""},
		{tool(""), `{}`, "{}\n", ""},
		{tool(""), `{"a": 1}`, "", "additional properties 'a' not allowed"},
		{tool(`{"type": "array"}`), `[1, 2]`, "[1,2]\n", ""},
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
		if k := refusal.Of(err); k == nil || !k.IsPolicy() || k.Name() != "InputRefused" {
			t.Errorf("kind %v", k)
		}
	}
}

// TestSelfReferentialSchemas: a schema that refers to itself without
// descending into the input (a model can write one by mistake or on
// purpose) is refused or validates; it never recurses without end.
func TestSelfReferentialSchemas(t *testing.T) {
	for _, schema := range []string{
		`{"$ref": "#"}`,
		`{"allOf": [{"$ref": "#"}]}`,
		`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`,
	} {
		sch, err := CompileSchema([]byte(schema))
		if err != nil {
			continue // refused at admission: fine
		}
		tool := &Tool{Declaration: &Declaration{Name: "t", Kind: KindNative, Command: []string{"true"}, InputSchema: []byte(schema)}}
		_, err = tool.CheckInput([]byte(`{"a": [1, {"b": 2}]}`))
		if !errors.Is(err, ErrInputRefused) || sch == nil {
			t.Errorf("%s: input %v, want a refusal (the schema can never be satisfied)", schema, err)
		}
	}
}
