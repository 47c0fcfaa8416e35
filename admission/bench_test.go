package admission

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
)

// BenchmarkDecode compares the strict decoder with a plain json.Unmarshal
// of the same declaration, side by side:
//
//	go test -run '^$' -bench Decode -count 5 ./admission/ | bench/ratios
func BenchmarkDecode(b *testing.B) {
	js, err := os.ReadFile("testdata/decls/valid-native-read.json")
	if err != nil {
		b.Fatal(err)
	}
	ys, err := os.ReadFile("testdata/decls/valid-yaml.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var d Declaration
			if err := json.Unmarshal(js, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(js, FormatJSON); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict-yaml", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(ys, FormatYAML); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRun compares running a registered tool (load and re-hash,
// facts, input validation, spec) with running the same command through
// runtime.Run directly:
//
//	go test -run '^$' -bench Run -count 5 ./admission/ | bench/ratios
func BenchmarkRun(b *testing.B) {
	n := requireBwrap(b)
	ws := b.TempDir()
	a, err := New(Config{Workspace: ws, Substrates: map[string]substrate.Enforcer{KindNative: n}})
	if err != nil {
		b.Fatal(err)
	}
	reg, _ := OpenRegistry(RegistryConfig{Workspace: ws})
	decl := []byte(`{"name": "t", "kind": "native", "command": ["true"], "capabilities": ["fs.read:workspace"], "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}`)
	adm, err := a.Admit(context.Background(), Source{Data: decl, Dir: ws})
	if err != nil {
		b.Fatal(err)
	}
	if err := reg.Register(adm); err != nil {
		b.Fatal(err)
	}
	p, err := a.Prepare(context.Background(), RunConfig{Registry: reg}, "t", []byte(`{"x": "y"}`))
	if err != nil {
		b.Fatal(err)
	}
	direct := p.Spec
	b.Run("runtime.Run", func(b *testing.B) {
		for b.Loop() {
			spec := direct
			spec.Stdin = nil
			if res, err := runtime.Run(context.Background(), spec); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("prepare+run", func(b *testing.B) {
		for b.Loop() {
			p, err := a.Prepare(context.Background(), RunConfig{Registry: reg}, "t", []byte(`{"x": "y"}`))
			if err != nil {
				b.Fatal(err)
			}
			if res, err := runtime.Run(context.Background(), p.Spec); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
}
