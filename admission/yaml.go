//go:build !cordon_front

package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file is one of the three that cordon's front end (the build tag
// cordon_front) leaves out, for the initialisation its dependency costs
// every process (docs/architecture.md); front.go stands in for them there.

// maxYAMLNodes bounds the nodes of a YAML declaration.
const maxYAMLNodes = 100000

// yamlToJSON reads one YAML document into a node tree, refuses what JSON
// cannot say or what could multiply its size (aliases, merge keys, custom
// tags, non-string keys, duplicate keys), and returns it as JSON.
func yamlToJSON(data []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &DecodeError{Format: FormatYAML, Reason: "empty input; a declaration is a mapping"}
		}
		return nil, &DecodeError{Format: FormatYAML, Reason: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, &DecodeError{Format: FormatYAML, Reason: "more than one YAML document; a declaration is one"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &DecodeError{Format: FormatYAML, Reason: "the declaration must be a mapping"}
	}
	count := 0
	v, err := yamlValue(doc.Content[0], 1, &count)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func yamlValue(n *yaml.Node, depth int, count *int) (any, error) {
	fail := func(format string, args ...any) error {
		return &DecodeError{Format: FormatYAML, Line: n.Line, Reason: fmt.Sprintf(format, args...)}
	}
	*count++
	if *count > maxYAMLNodes {
		return nil, fail("more than %d values", maxYAMLNodes)
	}
	if depth > MaxDepth {
		return nil, fail("nested deeper than %d levels", MaxDepth)
	}
	if n.Anchor != "" {
		return nil, fail("anchors and aliases are not accepted (&%s)", shorten(n.Anchor))
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, fail("anchors and aliases are not accepted (*%s)", shorten(n.Value))
	case yaml.MappingNode:
		if n.Tag != "!!map" {
			return nil, fail("tag %s is not accepted", shorten(n.Tag))
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
				if k.Tag == "!!merge" {
					return nil, &DecodeError{Format: FormatYAML, Line: k.Line, Reason: "merge keys (<<) are not accepted"}
				}
				return nil, &DecodeError{Format: FormatYAML, Line: k.Line, Reason: "mapping keys must be strings"}
			}
			if _, dup := m[k.Value]; dup {
				return nil, &DecodeError{Format: FormatYAML, Line: k.Line, Reason: fmt.Sprintf("duplicate key %q", shorten(k.Value))}
			}
			val, err := yamlValue(v, depth+1, count)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		if n.Tag != "!!seq" {
			return nil, fail("tag %s is not accepted", shorten(n.Tag))
		}
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := yamlValue(c, depth+1, count)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fail("%s", strings.TrimPrefix(err.Error(), "yaml: "))
			}
			if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				return nil, fail("%s cannot be said in JSON", n.Value)
			}
			return v, nil
		}
		return nil, fail("tag %s is not accepted", shorten(n.Tag))
	}
	return nil, fail("unexpected YAML node")
}
