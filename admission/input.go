package admission

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxInputSize bounds a tool's input, in bytes.
const MaxInputSize = 1 << 20

// InputError is a run's input that the tool's input_schema does not
// accept, or that is not strict JSON.
type InputError struct {
	Tool     string
	Problems []string // one per failed check: "at /glob: got number, want string"
}

func (e *InputError) Error() string {
	return fmt.Sprintf("refusing input for tool %q — it does not match the tool's input_schema: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// Unwrap returns [ErrInputRefused].
func (e *InputError) Unwrap() error { return ErrInputRefused }

// CheckInput validates a run's input against the tool's input_schema and
// returns it as the tool receives it on stdin: compact JSON and a newline.
// Empty input means {}. Input must be one JSON value of at most
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
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return nil, bad("the input is not JSON: %v", err)
	}
	sch, err := CompileSchema(t.Declaration.InputSchema)
	if err != nil {
		return nil, bad("%v", err) // admission compiled it; the registry was verified
	}
	if err := sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, bad("%v", err)
		}
		ie := &InputError{Tool: name}
		collectProblems(ve.BasicOutput(), &ie.Problems)
		if len(ie.Problems) == 0 {
			ie.Problems = []string{oneLine(ve.Error())}
		}
		if len(ie.Problems) > 10 {
			ie.Problems = append(ie.Problems[:10], fmt.Sprintf("and %d more", len(ie.Problems)-10))
		}
		return nil, ie
	}
	var out bytes.Buffer
	if err := compactJSON(&out, input); err != nil {
		return nil, bad("%v", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func collectProblems(u *jsonschema.OutputUnit, out *[]string) {
	if u == nil {
		return
	}
	if u.Error != nil {
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		msg := u.Error.String()
		if !strings.HasPrefix(msg, "validation failed") {
			*out = append(*out, fmt.Sprintf("at %s: %s", loc, msg))
		}
	}
	for i := range u.Errors {
		collectProblems(&u.Errors[i], out)
	}
}
