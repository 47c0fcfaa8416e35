package admission

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode and Validate, as JSON and as
// YAML: they must not panic, must answer every input with a declaration or
// a *DecodeError, and must keep to the size limit.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/decls/*.json")
	yamls, _ := filepath.Glob("testdata/decls/*.yaml")
	for _, file := range append(files, yamls...) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, filepath.Ext(file) == ".yaml")
	}
	f.Add([]byte("a: &a [*a]"), true)
	f.Add([]byte(`{"name":"x","name":"y"}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		format := FormatJSON
		if yaml {
			format = FormatYAML
		}
		d, err := Decode(data, format)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrInvalidDeclaration) {
				t.Fatalf("Decode error %T %v is not a *DecodeError", err, err)
			}
			return
		}
		if len(data) > MaxDeclarationSize {
			t.Fatalf("decoded %d bytes, more than the limit", len(data))
		}
		for _, r := range d.Validate() {
			if r.Blocked == "" || r.Err == nil {
				t.Fatalf("empty reason %+v", r)
			}
		}
		set, reasons := d.parseCapabilities()
		if set.Len()+len(reasons) < min(len(d.Capabilities), 1) {
			t.Fatalf("capabilities %q neither parsed nor refused", d.Capabilities)
		}
		if _, err := CompileSchema(d.InputSchema); err != nil && err.Error() == "" {
			t.Fatal("empty schema error")
		}
	})
}
