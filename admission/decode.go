package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Formats [Decode] accepts.
const (
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// DecodeError is a declaration that cannot be decoded: it is not JSON or
// YAML, or breaks a strictness rule (an unknown field, a wrong type, a
// duplicate key, trailing data, too deep, too large).
type DecodeError struct {
	Format string // "json" or "yaml"
	Field  string // the top-level field, when the error is about one
	Line   int    // 1-based, when known
	Reason string
}

func (e *DecodeError) Error() string {
	where := ""
	if e.Line > 0 {
		where = fmt.Sprintf(" (line %d)", e.Line)
	}
	return fmt.Sprintf("cannot decode the %s declaration%s: %s", e.Format, where, e.Reason)
}

// Unwrap returns [ErrInvalidDeclaration].
func (e *DecodeError) Unwrap() error { return ErrInvalidDeclaration }

// Decode decodes a declaration strictly. format is "json", "yaml", or ""
// to choose by the first non-blank byte ('{' or '[' is JSON, anything
// else YAML).
// Unknown fields, wrong types, null values, duplicate keys (in every
// object, also inside input_schema), trailing data, nesting deeper than
// [MaxDepth] and input larger than [MaxDeclarationSize] are errors. YAML
// goes through the same rules: it is read into a node tree (one document;
// aliases, merge keys and custom tags refused), converted to JSON and
// decoded by the JSON path, so both formats land in the same struct through
// the same checks. Errors are [*DecodeError] values.
func Decode(data []byte, format string) (*Declaration, error) {
	if format == "" {
		format = FormatYAML
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			format = FormatJSON
		}
	}
	if len(data) > MaxDeclarationSize {
		return nil, &DecodeError{Format: format, Reason: fmt.Sprintf("larger than %d bytes", MaxDeclarationSize)}
	}
	if !utf8.Valid(data) {
		return nil, &DecodeError{Format: format, Reason: "not valid UTF-8"}
	}
	switch format {
	case FormatJSON:
		return decodeJSON(data)
	case FormatYAML:
		js, err := yamlToJSON(data)
		if err != nil {
			return nil, err
		}
		d, err := decodeJSON(js)
		var de *DecodeError
		if errors.As(err, &de) {
			de.Format, de.Line = FormatYAML, 0
		}
		return d, err
	}
	return nil, &DecodeError{Format: format, Reason: fmt.Sprintf("unknown format %q (json or yaml)", format)}
}

func decodeJSON(data []byte) (*Declaration, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, &DecodeError{Format: FormatJSON, Reason: "the declaration must be a JSON object"}
	}
	// Exact, case-sensitive field names: encoding/json would match "NAME"
	// to Name and let the last of two spellings win.
	var unknown []string
	for k, v := range top {
		want, ok := fields[k]
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%q", shorten(k)))
			continue
		}
		if string(v) == "null" {
			return nil, &DecodeError{Format: FormatJSON, Field: k, Reason: fmt.Sprintf("field %q is null; it takes %s (or leave it out)", k, want)}
		}
	}
	if len(unknown) > 0 {
		sortStrings(unknown)
		return nil, &DecodeError{Format: FormatJSON, Reason: fmt.Sprintf("unknown %s %s; the fields are %s", plural(len(unknown), "field", "fields"), strings.Join(unknown, ", "), fieldList())}
	}
	var d Declaration
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field, _, _ := strings.Cut(te.Field, ".")
			return nil, &DecodeError{Format: FormatJSON, Field: field, Line: lineOf(data, te.Offset),
				Reason: fmt.Sprintf("field %q takes %s, not a JSON %s", field, fields[field], te.Value)}
		}
		return nil, &DecodeError{Format: FormatJSON, Reason: err.Error()}
	}
	if len(d.InputSchema) > 0 && d.InputSchema[0] != '{' && string(d.InputSchema) != "true" && string(d.InputSchema) != "false" {
		return nil, &DecodeError{Format: FormatJSON, Field: "input_schema", Reason: "field \"input_schema\" takes an object (a JSON Schema)"}
	}
	return &d, nil
}

// checkJSON walks the tokens of data: one JSON object, nothing after it,
// no duplicate key in any object, nesting at most MaxDepth.
func checkJSON(data []byte) error { return checkJSONValue(data, true) }

// compactJSON writes data without insignificant space.
func compactJSON(dst *bytes.Buffer, data []byte) error { return json.Compact(dst, data) }

// checkJSONValue is checkJSON for any one JSON value, or only an object.
func checkJSONValue(data []byte, object bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	fail := func(reason string) error {
		return &DecodeError{Format: FormatJSON, Line: lineOf(data, dec.InputOffset()), Reason: reason}
	}
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next token of an object is a key
	}
	var stack []*frame
	for n := 0; ; n++ {
		tok, err := dec.Token()
		if err == io.EOF {
			if n == 0 {
				return fail("empty input; a declaration is a JSON object")
			}
			if len(stack) > 0 {
				return fail("unexpected end of input")
			}
			return nil
		}
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return &DecodeError{Format: FormatJSON, Line: lineOf(data, se.Offset), Reason: se.Error()}
			}
			return fail(err.Error())
		}
		if n > 0 && len(stack) == 0 {
			return fail("data after the first JSON value")
		}
		if n == 0 && object {
			if d, ok := tok.(json.Delim); !ok || d != '{' {
				return fail("the declaration must be a JSON object")
			}
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return fail(fmt.Sprintf("duplicate key %q", shorten(k)))
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > MaxDepth {
			return fail(fmt.Sprintf("nested deeper than %d levels", MaxDepth))
		}
	}
}

// lineOf returns the 1-based line of byte offset off in data.
func lineOf(data []byte, off int64) int {
	if off < 0 || off > int64(len(data)) {
		return 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}
