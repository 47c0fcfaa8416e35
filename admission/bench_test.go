package admission

import (
	"encoding/json"
	"os"
	"testing"
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
