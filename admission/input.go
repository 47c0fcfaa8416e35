package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxInputSize bounds a tool's input, in bytes.
const MaxInputSize = 1 << 20

// InputError is a run's input that the tool's input_schema does not
// accept, or that is not strict JSON.
type InputError struct {
	Tool     string
	Problems []string // what failed, and where in the schema: `input_schema#/properties/glob: type: 5 has type "integer", want "string"`
}

func (e *InputError) Error() string {
	return fmt.Sprintf("refusing input for tool %q — it does not match the tool's input_schema: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// Unwrap returns [ErrInputRefused].
func (e *InputError) Unwrap() error { return ErrInputRefused }

// CheckInput validates a run's input against the tool's input_schema and
// returns it as the tool receives it on stdin: exactly the JSON given,
// nothing added. Empty input means {}. Input must be one JSON value of at most
// [MaxInputSize] bytes, without duplicate keys or trailing data.
func (t *Tool) CheckInput(input []byte) ([]byte, error) {
	name := t.Declaration.Name
	bad := func(format string, args ...any) error {
		return &InputError{Tool: name, Problems: []string{fmt.Sprintf(format, args...)}}
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	if len(input) > MaxInputSize {
		return nil, bad("the input is larger than %d bytes", MaxInputSize)
	}
	if err := checkJSONValue(input, false); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return nil, bad("the input is not strict JSON: %s", de.Reason)
		}
		return nil, bad("the input is not strict JSON: %v", err)
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, bad("the input is not JSON: %v", err)
	}
	check, err := compileSchema(t.Declaration.InputSchema)
	if err != nil {
		return nil, bad("%v", err) // admission compiled it; the registry was verified
	}
	if err := check(v); err != nil {
		return nil, &InputError{Tool: name, Problems: []string{inputProblem(err)}}
	}
	return input, nil
}

// inputProblem rewrites the validator's error, "validating root:
// validating /properties/n: type: ...", as "at input_schema#/properties/n:
// type: ...": where in the schema the input failed, and why.
func inputProblem(err error) string {
	msg, at := err.Error(), ""
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			break
		}
		loc, after, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		at, msg = loc, after
	}
	switch {
	case at == "" || at == "root":
		at = "#"
	case strings.HasPrefix(at, "/"):
		at = "#" + at
	}
	return oneLine(fmt.Sprintf("input_schema%s: %s", at, msg))
}
