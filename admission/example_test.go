package admission_test

import (
	"fmt"

	"github.com/cordon-run/cordon/admission"
)

func ExampleDecode() {
	_, err := admission.Decode([]byte(`{"name": "x", "name": "y"}`), admission.FormatJSON)
	fmt.Println(err)
	_, err = admission.Decode([]byte("name: x\nsandbox: off\n"), admission.FormatYAML)
	fmt.Println(err)
	d, _ := admission.Decode([]byte(`{"name": "hello", "kind": "native", "command": ["sh", "-c", "echo hi"], "capabilities": []}`), "")
	fmt.Println(d, d.Validate())
	// Output:
	// cannot decode the json declaration (line 1): duplicate key "name"
	// cannot decode the yaml declaration: unknown field "sandbox"; the fields are name, description, kind, substrate, command, module, args, files, capabilities, input_schema
	// native tool "hello" (sh -c echo hi) asking for [] []
}
