package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// The $schema values an input_schema may declare, and the spelling
// google/jsonschema-go validates each draft under. Without $schema a
// schema is draft 2020-12.
const (
	draft202012 = "https://json-schema.org/draft/2020-12/schema"
	draft07     = "http://json-schema.org/draft-07/schema#"
)

// SchemaError is an input_schema that cordon does not compile: each
// problem names where it is in the schema ("input_schema#/properties/n")
// and what to write instead.
type SchemaError struct {
	Problems []string
}

func (e *SchemaError) Error() string { return strings.Join(e.Problems, "; ") }

// schemaRule is one of the checks an input_schema passes before the
// validator resolves it. google/jsonschema-go reads a schema into Go types
// (so "type": 5 or "required": "a" do not compile) and resolves its
// references, but it does not check the schema against its meta-schema, and
// it recurses without end on a schema that applies itself to the same
// value. These rules close the holes that matter; they are not a
// meta-schema.
type schemaRule struct {
	Name, Summary string
	check         func(d *schemaDoc, report func(n *schemaNode, format string, args ...any))
}

// schemaRules are the rules, in the order they report.
var schemaRules = []schemaRule{
	{"draft", `"$schema", at the root only, is draft 2020-12 or draft-07`, ruleDraft},
	{"draft-keywords", "no keyword of the other draft, which the validator would ignore (items as a list, additionalItems or dependencies in 2020-12; prefixItems, dependentRequired or dependentSchemas in draft-07)", ruleDraftKeywords},
	{"ids", `"$id" only at the root (a draft-07 "#name" anchor below it), so references stay within the schema`, ruleIDs},
	{"keyword-case", "no key that differs from a keyword only in case (the validator would read it as that keyword)", ruleKeywordCase},
	{"type-names", `"type" names JSON types: array, boolean, integer, null, number, object, string`, ruleTypeNames},
	{"counts", "minLength, maxLength, minItems, maxItems, minProperties, maxProperties, minContains and maxContains are not negative", ruleCounts},
	{"multiple-of", `"multipleOf" is greater than 0`, ruleMultipleOf},
	{"no-loops", "no chain of $ref, $dynamicRef, allOf, anyOf, oneOf, not, if/then/else or dependentSchemas leads back to a schema on the same value", ruleNoLoops},
}

// SchemaRules lists, as "name: summary", the rules an input_schema passes
// before it is compiled, in order.
func SchemaRules() []string {
	out := make([]string, len(schemaRules))
	for i, r := range schemaRules {
		out[i] = r.Name + ": " + r.Summary
	}
	return out
}

// schemaDoc is an input_schema as JSON values, with every schema object in
// it (properties, items, $defs, ... walked by keyword) indexed by its JSON
// pointer.
type schemaDoc struct {
	root    *schemaNode
	nodes   []*schemaNode          // document order
	byPtr   map[string]*schemaNode // by canonical JSON pointer
	anchors map[string]*schemaNode // $anchor, $dynamicAnchor, draft-07 "$id": "#name"
	draft   string                 // draft202012 or draft07
	rootID  string
	// badDraft is a "$schema" at the root that names no draft the
	// validator knows, for ruleDraft.
	badDraft any
}

// schemaNode is one schema object of a schemaDoc.
type schemaNode struct {
	ptr string // JSON pointer from the root: "" or "/properties/n"
	obj map[string]any
}

// Shapes of the keywords that hold schemas.
const (
	notSchema = iota
	oneSchema
	schemaList
	schemaMap
)

// subschemas returns the shape of keyword kw's schemas, and whether they
// apply to the same value as the schema holding them (in place) rather than
// to a part of it or not at all ($defs).
func subschemas(kw string) (shape int, inPlace bool) {
	switch kw {
	case "allOf", "anyOf", "oneOf":
		return schemaList, true
	case "not", "if", "then", "else":
		return oneSchema, true
	case "dependentSchemas", "dependencies":
		return schemaMap, true
	case "prefixItems":
		return schemaList, false
	case "items", "additionalItems", "contains", "additionalProperties", "propertyNames",
		"unevaluatedItems", "unevaluatedProperties", "contentSchema":
		return oneSchema, false
	case "$defs", "definitions", "properties", "patternProperties":
		return schemaMap, false
	}
	return notSchema, false
}

func newSchemaDoc(v any) (*schemaDoc, error) {
	d := &schemaDoc{byPtr: map[string]*schemaNode{}, anchors: map[string]*schemaNode{}, draft: draft202012}
	switch v := v.(type) {
	case bool:
		d.root = &schemaNode{obj: map[string]any{}}
		d.nodes = []*schemaNode{d.root}
		return d, nil
	case map[string]any:
		switch s, ok := v["$schema"]; {
		case !ok:
		case draftOf(s) != "":
			d.draft = draftOf(s)
		default:
			d.badDraft = s
		}
		d.rootID, _ = v["$id"].(string)
		d.walk(v, "")
		d.root = d.byPtr[""]
		return d, nil
	}
	return nil, errors.New(`input_schema must be a JSON object (a schema) or true or false, such as {"type": "object", "properties": {...}}`)
}

// draftOf returns the validator's spelling of the draft s names, or "".
func draftOf(s any) string {
	str, _ := s.(string)
	str = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(str, "https://"), "http://"), "#")
	switch str {
	case "json-schema.org/draft/2020-12/schema":
		return draft202012
	case "json-schema.org/draft-07/schema":
		return draft07
	}
	return ""
}

func (d *schemaDoc) walk(v any, ptr string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return // true, false, or not a schema (the validator reports that)
	}
	n := &schemaNode{ptr: ptr, obj: obj}
	d.nodes = append(d.nodes, n)
	d.byPtr[ptr] = n
	for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
		if a, ok := obj[kw].(string); ok && a != "" && d.draft == draft202012 {
			d.anchors[a] = n
		}
	}
	if id, ok := obj["$id"].(string); ok && ptr != "" && d.draft == draft07 && strings.HasPrefix(id, "#") {
		d.anchors[id[1:]] = n
	}
	for _, kw := range sortedKeys(obj) {
		child := ptr + "/" + escapePointer(kw)
		switch shape, _ := subschemas(kw); {
		case shape == oneSchema && kw == "items":
			if list, ok := obj[kw].([]any); ok { // draft-07's list of items
				for i, s := range list {
					d.walk(s, fmt.Sprintf("%s/%d", child, i))
				}
				continue
			}
			d.walk(obj[kw], child)
		case shape == oneSchema:
			d.walk(obj[kw], child)
		case shape == schemaList:
			list, _ := obj[kw].([]any)
			for i, s := range list {
				d.walk(s, fmt.Sprintf("%s/%d", child, i))
			}
		case shape == schemaMap:
			m, _ := obj[kw].(map[string]any)
			for _, k := range sortedKeys(m) {
				d.walk(m[k], child+"/"+escapePointer(k))
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// resolve returns the node a $ref or $dynamicRef names, or nil when it
// names none in this schema (the validator then refuses the reference).
// With "$id" only at the root, every reference resolves against the root:
// "#", "#/json/pointer", "#anchor", or the root's own $id with one of
// those fragments. A $dynamicRef resolves to the same node: its dynamic
// scope has the root's anchors only.
func (d *schemaDoc) resolve(ref string) *schemaNode {
	u, err := url.Parse(ref)
	if err != nil {
		return nil
	}
	id, err := url.Parse(d.rootID)
	if err != nil {
		return nil
	}
	base := new(url.URL).ResolveReference(id) // as the validator resolves the root's $id
	t := base.ResolveReference(u)
	frag := t.Fragment
	t.Fragment, t.RawFragment = "", ""
	base.Fragment, base.RawFragment = "", ""
	if s := t.String(); s != "" && s != base.String() {
		return nil // another document
	}
	switch {
	case frag == "":
		return d.root
	case strings.HasPrefix(frag, "/"):
		segs := strings.Split(frag[1:], "/")
		for i, s := range segs {
			segs[i] = escapePointer(unescapePointer(s))
		}
		return d.byPtr["/"+strings.Join(segs, "/")]
	}
	return d.anchors[frag]
}

func ruleDraft(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	if d.badDraft != nil {
		report(d.root, `"$schema": %s is not a draft cordon validates; leave "$schema" out (draft 2020-12) or write %q or %q`,
			shortJSON(d.badDraft), draft202012, draft07)
	}
	for _, n := range d.nodes[1:] {
		if _, ok := n.obj["$schema"]; ok {
			report(n, `"$schema" is accepted only at the root of input_schema`)
		}
	}
}

func ruleDraftKeywords(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	for _, n := range d.nodes {
		if d.draft == draft07 {
			for _, kw := range []string{"prefixItems", "dependentRequired", "dependentSchemas"} {
				if _, ok := n.obj[kw]; ok {
					report(n, `%q is a draft 2020-12 keyword, which draft-07 validation ignores; remove "$schema" to validate with draft 2020-12`, kw)
				}
			}
			continue
		}
		if _, ok := n.obj["items"].([]any); ok {
			report(n, `"items" is a list, which draft 2020-12 validation ignores; use "prefixItems" for a list of schemas, one per position`)
		}
		if _, ok := n.obj["additionalItems"]; ok {
			report(n, `"additionalItems" is a draft-07 keyword, which draft 2020-12 validation ignores; use "items" (it applies after "prefixItems")`)
		}
		if _, ok := n.obj["dependencies"]; ok {
			report(n, `"dependencies" is a draft-07 keyword, which draft 2020-12 validation ignores; use "dependentRequired" or "dependentSchemas"`)
		}
	}
}

func ruleIDs(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	for _, n := range d.nodes[1:] {
		id, ok := n.obj["$id"]
		if !ok {
			continue
		}
		if s, _ := id.(string); d.draft == draft07 && strings.HasPrefix(s, "#") && !strings.Contains(s, "/") {
			continue // a draft-07 anchor
		}
		report(n, `"$id" is accepted only at the root of input_schema; name a part with "$anchor" or refer to it by pointer ("#/$defs/NAME")`)
	}
}

func ruleKeywordCase(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	kws := keywords()
	for _, n := range d.nodes {
		for _, k := range sortedKeys(n.obj) {
			if slices.Contains(kws, k) {
				continue
			}
			if i := slices.IndexFunc(kws, func(kw string) bool { return strings.EqualFold(kw, k) }); i >= 0 {
				report(n, "%q would be read as the keyword %q; spell it %q, or use a name that is not a keyword", shorten(k), kws[i], kws[i])
			}
		}
	}
}

var jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

func ruleTypeNames(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	for _, n := range d.nodes {
		names := []any{n.obj["type"]}
		if list, ok := n.obj["type"].([]any); ok {
			names = list
		}
		for _, t := range names {
			if s, ok := t.(string); ok && !slices.Contains(jsonTypes, s) {
				report(n, `"type": %q is not a JSON type; use one of %s`, shorten(s), strings.Join(jsonTypes, ", "))
			}
		}
	}
}

func ruleCounts(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	for _, n := range d.nodes {
		for _, kw := range []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"} {
			if f, ok := n.obj[kw].(float64); ok && f < 0 {
				report(n, "%q is %v; a count cannot be negative (0 means no lower bound)", kw, f)
			}
		}
	}
}

func ruleMultipleOf(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	for _, n := range d.nodes {
		if f, ok := n.obj["multipleOf"].(float64); ok && f <= 0 {
			report(n, `"multipleOf" is %v; it must be greater than 0`, f)
		}
	}
}

// ruleNoLoops refuses a schema that applies itself to the same value
// without end, such as {"$ref": "#"}: the validator would recurse until
// the process dies. A loop through properties, items or another keyword
// that descends into the value ends with the value (at most [MaxDepth]
// levels deep) and is accepted.
func ruleNoLoops(d *schemaDoc, report func(*schemaNode, string, ...any)) {
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[*schemaNode]int{}
	var path []*schemaNode
	var visit func(n *schemaNode)
	visit = func(n *schemaNode) {
		state[n] = onPath
		path = append(path, n)
		for _, next := range d.inPlace(n) {
			switch state[next] {
			case unvisited:
				visit(next)
			case onPath:
				i := slices.Index(path, next)
				var hops []string
				for _, p := range path[i:] {
					hops = append(hops, "#"+p.ptr)
				}
				report(next, "applies to the same value in a loop (%s → #%s) through $ref, allOf, anyOf, oneOf, not, if/then/else or dependentSchemas, so validating any input would never end; let the loop pass through a keyword that descends into the value (properties, items, ...) or remove it",
					strings.Join(hops, " → "), next.ptr)
			}
		}
		path = path[:len(path)-1]
		state[n] = done
	}
	for _, n := range d.nodes {
		if state[n] == unvisited {
			visit(n)
		}
	}
}

// inPlace returns the schemas that n applies to the value n applies to.
func (d *schemaDoc) inPlace(n *schemaNode) []*schemaNode {
	var out []*schemaNode
	add := func(m *schemaNode) {
		if m != nil {
			out = append(out, m)
		}
	}
	for _, kw := range sortedKeys(n.obj) {
		if kw == "$ref" || kw == "$dynamicRef" {
			if ref, ok := n.obj[kw].(string); ok {
				add(d.resolve(ref))
			}
			continue
		}
		shape, inPlace := subschemas(kw)
		if !inPlace {
			continue
		}
		child := n.ptr + "/" + escapePointer(kw)
		switch shape {
		case oneSchema:
			add(d.byPtr[child])
		case schemaList:
			list, _ := n.obj[kw].([]any)
			for i := range list {
				add(d.byPtr[fmt.Sprintf("%s/%d", child, i)])
			}
		case schemaMap:
			m, _ := n.obj[kw].(map[string]any)
			for _, k := range sortedKeys(m) {
				add(d.byPtr[child+"/"+escapePointer(k)])
			}
		}
	}
	return out
}

func shortJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return shorten(string(b))
}
