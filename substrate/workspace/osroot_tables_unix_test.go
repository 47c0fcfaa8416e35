//go:build unix

package workspace

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOSRootTables replays the test tables of Go's own os.Root tests
// ($GOROOT/src/os/root_test.go) against the guard, with os.Root as the
// ground truth. The tables are not copied: the file is parsed at test time
// and the composite literals of the tables are evaluated (string, bool and
// []string literals, and the little that surrounds them); an entry that
// cannot be evaluated is skipped and counted.
//
// The tables replayed:
//
//   - rootTestCases: a layout, a path and the file it should reach. Each
//     case is run with that file absent, as a file and as a directory,
//     as Go's tests create it.
//   - rootConsistencyTestCases: a layout and a path, run as given and
//     spelled absolutely beneath the workspace (what Go's consistency
//     tests compare os.Root with).
//   - testFileRefs and testFileLimitedRefs, the references of the
//     multi-descriptor tests (TestRootMulti*): the files they describe are
//     generated as allTestFileDescs does without -root_comprehensive, one
//     target for the one-path operations and source/target pairs for
//     Rename as runRootMultiTest2 does.
//
// Every path runs through the read-only operations (ReadFile, OpenFile,
// List, Info, Stat, Lstat, Readlink) and, each on a fresh copy of the
// layout, through the changes (WriteFile, OpenFile with O_CREATE, Mkdir,
// Remove, Rename from and to it). Each side must fail, or reach the same
// file (named by its path in the layout, found by inode) with the same
// result, and leave the same tree (named by path and content: the guard's
// atomic replace gives the file a new inode where os.Root writes in place).
//
// A disagreement is a documented difference when replaying os.Root with
// the difference taken out makes the two agree:
//
//   - D1, an absolute symlink into the workspace: os.Root replays on a
//     layout where it is the relative link it stands for;
//   - D2, an absolute name beginning with the workspace: os.Root replays
//     with the name made relative;
//   - D3, WriteFile creates missing parents: os.Root replays with the
//     directories the guard created made beforehand;
//   - D4, harness state: the guard refused with ErrHarnessState.
//
// A disagreement where os.Root departs from the kernel (raw system calls
// on the absolute path agree with the guard, and os.Root did not refuse an
// escape) is counted and logged apart; it is not the guard's fault. Any
// other disagreement fails the test.
func TestOSRootTables(t *testing.T) {
	src, why := ortFindSource()
	if src == "" {
		t.Skip(why)
	}
	tabs, err := ortParse(src)
	if err != nil {
		t.Skipf("cannot read Go's os.Root test tables from %s: %v", src, err)
	}
	for _, msg := range tabs.notes {
		t.Log(msg)
	}
	cases := tabs.cases()
	rp := &ortReplayer{t: t, base: ortBaseDir(t)}
	for _, c := range cases {
		rp.replay(c)
	}
	s := &rp.stats
	t.Logf("tables of %s: %d entries evaluated, %d skipped (%s)", src, tabs.evaluated, len(tabs.skipped), strings.Join(tabs.skipped, "; "))
	t.Logf("%d cases (entries × target variants × spellings), %d comparisons replayed: %d agreed (%d both failed, %d both succeeded), %d documented differences %v, %d where os.Root departs from the kernel, %d disagreements; %d comparisons skipped",
		len(cases), s.replayed, s.agreed, s.bothFailed, s.agreed-s.bothFailed, s.documented, s.byKind, s.departures, s.failures, s.skipped)
	t.Logf("WriteFile through a symlink in the last component to an existing file: %v (the same tree either way: compared by path and content)", s.linkWrites)
}

// ortBaseDir is where the layouts are built. The replay builds a few
// thousand small trees, which on a disk file system with slow metadata
// operations takes seconds: on Linux, unless TMPDIR names a directory,
// the tmpfs /dev/shm is used when there is one.
func ortBaseDir(t *testing.T) string {
	dir := ""
	if runtime.GOOS == "linux" && os.Getenv("TMPDIR") == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			if d, err := os.MkdirTemp("/dev/shm", "TestOSRootTables"); err == nil {
				t.Cleanup(func() { os.RemoveAll(d) })
				dir = d
			}
		}
	}
	if dir == "" {
		dir = t.TempDir()
	}
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return canon
}

// ---- locating and parsing Go's tables ----

func ortFindSource() (string, string) {
	rel := filepath.Join("src", "os", "root_test.go")
	var tried []string
	if g := runtime.GOROOT(); g != "" {
		p := filepath.Join(g, rel)
		if _, err := os.Stat(p); err == nil {
			return p, ""
		}
		tried = append(tried, p)
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if g := strings.TrimSpace(string(out)); g != "" {
			p := filepath.Join(g, rel)
			if _, err := os.Stat(p); err == nil {
				return p, ""
			}
			tried = append(tried, p)
		}
	}
	return "", fmt.Sprintf("Go's os.Root tests are not installed (tried %s)", strings.Join(tried, ", "))
}

// ortRow is one evaluated entry of a table: its fields by name, and the
// fields that could not be evaluated with the reason.
type ortRow struct {
	fields map[string]any
	bad    map[string]string
}

type ortTables struct {
	rootCases, consistency, refs, limitedRefs []ortRow
	evaluated                                 int
	skipped                                   []string
	notes                                     []string
}

// The fields the replay reads, per table; an entry setting any other field
// is skipped (its meaning is unknown). Fields that only adjust Go's
// comparison of os.Root with the plain os functions on other platforms are
// ignored.
var (
	ortRootFields        = []string{"name", "fs", "open", "target", "ltarget", "wantError", "alwaysFails"}
	ortConsistencyFields = []string{"name", "fs", "open", "fsFunc", "detailedErrorMismatch", "check"}
	ortConsistencyIgnore = []string{"detailedErrorMismatch", "check"}
	ortRefFields         = []string{"name", "template", "escapes"}
)

func ortParse(src string) (*ortTables, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, src, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	structs := map[string][]string{}
	values := map[string]ast.Expr{}
	for _, d := range file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, sp := range gd.Specs {
			switch sp := sp.(type) {
			case *ast.TypeSpec:
				if st, ok := sp.Type.(*ast.StructType); ok {
					for _, f := range st.Fields.List {
						for _, n := range f.Names {
							structs[sp.Name.Name] = append(structs[sp.Name.Name], n.Name)
						}
					}
				}
			case *ast.ValueSpec:
				for i, n := range sp.Names {
					if i < len(sp.Values) {
						values[n.Name] = sp.Values[i]
					}
				}
			}
		}
	}
	tabs := &ortTables{}
	for _, want := range []struct {
		typ    string
		fields []string
	}{{"rootTest", []string{"name", "fs", "open", "target"}}, {"rootConsistencyTest", []string{"name", "fs", "open"}}, {"testFileRef", []string{"name", "template"}}} {
		have := structs[want.typ]
		for _, f := range want.fields {
			if !slices.Contains(have, f) {
				return nil, fmt.Errorf("type %s has fields %v, not %q", want.typ, have, f)
			}
		}
		tabs.notes = append(tabs.notes, fmt.Sprintf("%s fields: %s", want.typ, strings.Join(have, ", ")))
	}
	ev := &ortEval{}
	get := func(name string, known, ignore []string, skipIfSet map[string]string) []ortRow {
		e, ok := values[name]
		if !ok {
			tabs.skipped = append(tabs.skipped, name+": not found")
			return nil
		}
		rows, err := ev.table(e)
		if err != nil {
			tabs.skipped = append(tabs.skipped, name+": "+err.Error())
			return nil
		}
		var kept []ortRow
	rows:
		for i, r := range rows {
			label := fmt.Sprintf("%s[%d]", name, i)
			if n, ok := r.fields["name"].(string); ok {
				label += " " + strconv.Quote(n)
			}
			for f := range r.fields {
				if !slices.Contains(known, f) {
					tabs.skipped = append(tabs.skipped, label+": unknown field "+f)
					continue rows
				}
			}
			for f, why := range r.bad {
				switch {
				case skipIfSet[f] != "":
					tabs.skipped = append(tabs.skipped, label+": "+skipIfSet[f])
					continue rows
				case slices.Contains(ignore, f):
					tabs.notes = append(tabs.notes, fmt.Sprintf("%s: field %s ignored (it adjusts Go's os-versus-os.Root comparison only)", label, f))
				default:
					tabs.skipped = append(tabs.skipped, fmt.Sprintf("%s: field %s: %s", label, f, why))
					continue rows
				}
			}
			tabs.evaluated++
			kept = append(kept, r)
		}
		return kept
	}
	tabs.rootCases = get("rootTestCases", ortRootFields, nil, nil)
	tabs.consistency = get("rootConsistencyTestCases", ortConsistencyFields, ortConsistencyIgnore,
		map[string]string{"fsFunc": "the layout is built by a function (fsFunc)"})
	tabs.refs = get("testFileRefs", ortRefFields, nil, nil)
	if e, ok := values["testFileLimitedRefs"]; ok {
		if se, ok := e.(*ast.SliceExpr); ok && ortIsIdent(se.X, "testFileRefs") && !se.Slice3 {
			lo, hi := 0, len(tabs.refs)
			var err error
			if se.Low != nil {
				lo, err = ev.int(se.Low)
			}
			if err == nil && se.High != nil {
				hi, err = ev.int(se.High)
			}
			if err == nil && 0 <= lo && lo <= hi && hi <= len(tabs.refs) {
				tabs.limitedRefs = tabs.refs[lo:hi]
			} else {
				tabs.skipped = append(tabs.skipped, "testFileLimitedRefs: cannot evaluate "+types.ExprString(e))
			}
		} else {
			tabs.skipped = append(tabs.skipped, "testFileLimitedRefs: cannot evaluate "+types.ExprString(e))
		}
	} else if tabs.refs != nil {
		tabs.skipped = append(tabs.skipped, "testFileLimitedRefs: not found")
	}
	return tabs, nil
}

func ortIsIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// ortEval evaluates the constant expressions of the tables: literals,
// []string composites, runtime.GOOS and GOARCH, string concatenation and
// comparison, boolean operators, strings.Repeat, and a function literal
// called in place whose body is if statements and returns.
type ortEval struct{}

func (ev *ortEval) table(e ast.Expr) ([]ortRow, error) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("not a composite literal: %s", types.ExprString(e))
	}
	var rows []ortRow
	for i, el := range lit.Elts {
		cl, ok := el.(*ast.CompositeLit)
		if !ok {
			return nil, fmt.Errorf("element %d is not a composite literal", i)
		}
		r := ortRow{fields: map[string]any{}, bad: map[string]string{}}
		for j, f := range cl.Elts {
			kv, ok := f.(*ast.KeyValueExpr)
			if !ok {
				r.bad[fmt.Sprintf("#%d", j)] = "positional field"
				continue
			}
			key, ok := kv.Key.(*ast.Ident)
			if !ok {
				r.bad[fmt.Sprintf("#%d", j)] = "key is not a name"
				continue
			}
			v, err := ev.expr(kv.Value)
			if err != nil {
				r.bad[key.Name] = err.Error()
				continue
			}
			r.fields[key.Name] = v
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (ev *ortEval) int(e ast.Expr) (int, error) {
	v, err := ev.expr(e)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int)
	if !ok {
		return 0, fmt.Errorf("%s is not an int", types.ExprString(e))
	}
	return n, nil
}

func (ev *ortEval) expr(e ast.Expr) (any, error) {
	fail := func() (any, error) { return nil, fmt.Errorf("cannot evaluate %s", types.ExprString(e)) }
	switch e := e.(type) {
	case *ast.BasicLit:
		switch e.Kind {
		case token.STRING:
			return strconv.Unquote(e.Value)
		case token.INT:
			n, err := strconv.ParseInt(e.Value, 0, 64)
			return int(n), err
		}
	case *ast.Ident:
		switch e.Name {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	case *ast.ParenExpr:
		return ev.expr(e.X)
	case *ast.SelectorExpr:
		if ortIsIdent(e.X, "runtime") {
			switch e.Sel.Name {
			case "GOOS":
				return runtime.GOOS, nil
			case "GOARCH":
				return runtime.GOARCH, nil
			}
		}
	case *ast.CompositeLit:
		if at, ok := e.Type.(*ast.ArrayType); ok && at.Len == nil && ortIsIdent(at.Elt, "string") {
			out := []string{}
			for _, el := range e.Elts {
				v, err := ev.expr(el)
				if err != nil {
					return nil, err
				}
				s, ok := v.(string)
				if !ok {
					return fail()
				}
				out = append(out, s)
			}
			return out, nil
		}
	case *ast.UnaryExpr:
		if e.Op == token.NOT {
			v, err := ev.expr(e.X)
			if b, ok := v.(bool); ok && err == nil {
				return !b, nil
			}
		}
	case *ast.BinaryExpr:
		x, err := ev.expr(e.X)
		if err != nil {
			return nil, err
		}
		y, err := ev.expr(e.Y)
		if err != nil {
			return nil, err
		}
		xs, xok := x.(string)
		ys, yok := y.(string)
		xb, xbok := x.(bool)
		yb, ybok := y.(bool)
		switch {
		case e.Op == token.ADD && xok && yok:
			return xs + ys, nil
		case e.Op == token.EQL && xok && yok:
			return xs == ys, nil
		case e.Op == token.NEQ && xok && yok:
			return xs != ys, nil
		case e.Op == token.LAND && xbok && ybok:
			return xb && yb, nil
		case e.Op == token.LOR && xbok && ybok:
			return xb || yb, nil
		}
	case *ast.CallExpr:
		if fl, ok := e.Fun.(*ast.FuncLit); ok && len(e.Args) == 0 && fl.Type.Params.NumFields() == 0 {
			v, done, err := ev.block(fl.Body.List)
			if err != nil {
				return nil, err
			}
			if !done {
				return nil, fmt.Errorf("function literal does not return")
			}
			return v, nil
		}
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && ortIsIdent(sel.X, "strings") && sel.Sel.Name == "Repeat" && len(e.Args) == 2 {
			s, err := ev.expr(e.Args[0])
			if err != nil {
				return nil, err
			}
			n, err := ev.int(e.Args[1])
			if str, ok := s.(string); ok && err == nil && n >= 0 {
				return strings.Repeat(str, n), nil
			}
		}
	}
	return fail()
}

func (ev *ortEval) block(stmts []ast.Stmt) (any, bool, error) {
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.ReturnStmt:
			if len(s.Results) != 1 {
				return nil, false, fmt.Errorf("return of %d values", len(s.Results))
			}
			v, err := ev.expr(s.Results[0])
			return v, true, err
		case *ast.IfStmt:
			if s.Init != nil {
				return nil, false, fmt.Errorf("if statement with an init statement")
			}
			c, err := ev.expr(s.Cond)
			if err != nil {
				return nil, false, err
			}
			b, ok := c.(bool)
			if !ok {
				return nil, false, fmt.Errorf("condition %s is not a bool", types.ExprString(s.Cond))
			}
			var v any
			var done bool
			switch {
			case b:
				v, done, err = ev.block(s.Body.List)
			case s.Else != nil:
				switch el := s.Else.(type) {
				case *ast.BlockStmt:
					v, done, err = ev.block(el.List)
				default:
					v, done, err = ev.block([]ast.Stmt{el})
				}
			}
			if err != nil || done {
				return v, done, err
			}
		default:
			return nil, false, fmt.Errorf("statement of type %T", s)
		}
	}
	return nil, false, nil
}

// ---- the cases ----

// ortCase is one path (or pair) to replay: a layout in Go's makefs language
// ("d/", "f", "a => b", with $ABS for the root's absolute path) and the
// path, which may start with $ABS.
type ortCase struct {
	label string
	fs    []string
	open  string
	from  string // Rename pairs: the source path; open is the target
	ops   []string
}

var (
	ortReadOps   = []string{"read", "open", "list", "info", "stat", "lstat", "readlink"}
	ortChangeOps = []string{"writefile", "create", "mkdir", "remove"}
	ortMoveOps   = []string{"rename-from", "rename-to"}
)

func ortStr(r ortRow, f string) string    { s, _ := r.fields[f].(string); return s }
func ortList(r ortRow, f string) []string { l, _ := r.fields[f].([]string); return l }

func (tabs *ortTables) cases() []ortCase {
	var cases []ortCase
	allOps := slices.Concat(ortReadOps, ortChangeOps, ortMoveOps)
	for _, r := range tabs.rootCases {
		name, target := ortStr(r, "name"), ortStr(r, "target")
		type variant struct {
			what  string
			extra []string // layout entries that make the target
		}
		variants := []variant{{"", nil}}
		if target != "" {
			// Go's tests create the target as a file or a directory, or
			// leave it absent, depending on the operation.
			variants = []variant{
				{"target absent", nil},
				{"target a file", []string{target}},
				{"target a directory", []string{target + "/", target + "/found"}},
			}
		}
		for _, v := range variants {
			label := "rootTestCases/" + name
			if v.what != "" {
				label += " (" + v.what + ")"
			}
			cases = append(cases, ortCase{label: label, fs: slices.Concat(ortList(r, "fs"), v.extra), open: ortStr(r, "open"), ops: allOps})
		}
	}
	for _, r := range tabs.consistency {
		name, open := ortStr(r, "name"), ortStr(r, "open")
		cases = append(cases,
			ortCase{label: "rootConsistencyTestCases/" + name, fs: ortList(r, "fs"), open: open, ops: allOps},
			ortCase{label: "rootConsistencyTestCases/" + name + " (absolute)", fs: ortList(r, "fs"), open: "$ABS/" + open, ops: allOps})
	}
	if len(tabs.refs) > 0 && len(tabs.limitedRefs) > 0 {
		descs := ortDescs(tabs.refs, tabs.limitedRefs)
		for _, d := range descs {
			fs, p := d.create("target")
			cases = append(cases, ortCase{label: "TestRootMulti/" + d.String(), fs: append([]string{"DIR/"}, fs...), open: p,
				ops: slices.Concat(ortReadOps, ortChangeOps)})
		}
		// As runRootMultiTest2: pairs where at least one is simple.
		simple := func(d ortDesc) bool {
			return d.ref.template == "BASE" && (d.kind != ortSymlink || d.target.ref.template == "BASE")
		}
		for _, s := range descs {
			for _, d := range descs {
				if !simple(s) && !simple(d) {
					continue
				}
				sfs, sp := s.create("source")
				tfs, tp := d.create("target")
				cases = append(cases, ortCase{label: "TestRootMultiRename/" + s.String() + "_to_" + d.String(),
					fs: slices.Concat([]string{"DIR/"}, sfs, tfs), from: sp, open: tp, ops: []string{"rename"}})
			}
		}
	}
	return cases
}

// The descriptors of the multi-descriptor tests (testFileDesc).
type ortKind int

const (
	ortAbsent ortKind = iota + 1
	ortFile
	ortDir
	ortSymlink
)

func (k ortKind) String() string {
	return map[ortKind]string{ortAbsent: "absent", ortFile: "file", ortDir: "dir", ortSymlink: "symlink"}[k]
}

type ortRef struct{ name, template string }

type ortDesc struct {
	kind   ortKind
	ref    ortRef
	target *ortDesc
}

func (d ortDesc) String() string {
	s := d.ref.name + strings.ToUpper(d.kind.String()[:1])
	if d.kind == ortSymlink {
		s += d.target.String()
	}
	return s
}

// path is testFileRef.path, with $ABS for the root.
func (r ortRef) path(base string) string {
	p := strings.ReplaceAll(r.template, "BASE", base)
	if rest, ok := strings.CutPrefix(p, "/ROOT"); ok {
		p = "$ABS" + rest
	}
	return p
}

// create is testFileDesc.create as layout entries, and the path to use.
func (d ortDesc) create(base string) ([]string, string) {
	var fs []string
	switch d.kind {
	case ortFile:
		fs = []string{base}
	case ortDir:
		fs = []string{base + "/"}
	case ortSymlink:
		tfs, _ := d.target.create("s_" + base)
		fs = append(tfs, base+" => "+d.target.ref.path("s_"+base))
	}
	return fs, d.ref.path(base)
}

// ortDescs is allTestFileDescs without -root_comprehensive.
func ortDescs(refRows, limitedRows []ortRow) []ortDesc {
	conv := func(rows []ortRow) []ortRef {
		var refs []ortRef
		for _, r := range rows {
			refs = append(refs, ortRef{name: ortStr(r, "name"), template: ortStr(r, "template")})
		}
		return refs
	}
	refs, limited := conv(refRows), conv(limitedRows)
	kinds := []ortKind{ortAbsent, ortFile, ortDir}
	var out []ortDesc
	for _, ref := range refs {
		for _, k := range kinds {
			out = append(out, ortDesc{kind: k, ref: ref})
		}
	}
	for _, ref := range limited {
		for _, lk := range kinds {
			linkRefs := refs
			if lk != ortFile && lk != ortDir {
				linkRefs = limited
			}
			for _, lr := range linkRefs {
				out = append(out, ortDesc{kind: ortSymlink, ref: ref, target: &ortDesc{kind: lk, ref: lr}})
			}
		}
	}
	return out
}

// ---- layouts ----

// ortTree is one copy of a layout: top holds ROOT, the directory opened.
type ortTree struct {
	top, root string
	back      map[string]string // link text written for an absolute link → the original
}

// ortBuild creates the layout in a fresh directory, as Go's makefs does.
// With rewriteAbs, a link whose target is $ABS... is written as the
// relative link it stands for (D1).
func ortBuild(base string, layout []string, rewriteAbs bool) (*ortTree, error) {
	top, err := os.MkdirTemp(base, "t")
	if err != nil {
		return nil, err
	}
	tr := &ortTree{top: top, root: filepath.Join(top, "ROOT"), back: map[string]string{}}
	if err := os.Mkdir(tr.root, 0o777); err != nil {
		return nil, err
	}
	for _, ent := range layout {
		name, link, isLink := strings.Cut(ent, " => ")
		if isLink && rewriteAbs {
			if rest, ok := strings.CutPrefix(link, "$ABS"); ok && (rest == "" || rest[0] == '/') {
				rel := strings.Repeat("../", strings.Count(path.Clean(name), "/")) + "." + rest
				tr.back[rel] = strings.ReplaceAll(link, "$ABS", tr.root)
				link = rel
			}
		}
		name = strings.ReplaceAll(name, "$ABS", tr.root)
		link = strings.ReplaceAll(link, "$ABS", tr.root)
		if err := os.MkdirAll(path.Join(tr.root, path.Dir(name)), 0o777); err != nil {
			return nil, err
		}
		switch {
		case isLink:
			err = os.Symlink(link, path.Join(tr.root, name))
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(path.Join(tr.root, name), 0o777)
		default:
			err = os.WriteFile(path.Join(tr.root, name), []byte(name), 0o666)
		}
		if err != nil {
			return nil, err
		}
	}
	return tr, nil
}

func (tr *ortTree) remove() { os.RemoveAll(tr.top) }

// name spells a path template for this tree; with relative, $ABS... is
// made relative to the root (D2).
func (tr *ortTree) name(tmpl string, relative bool) string {
	if rest, ok := strings.CutPrefix(tmpl, "$ABS"); ok {
		if relative {
			return "." + rest
		}
		return tr.root + rest
	}
	return tmpl
}

// norm makes a link text comparable between copies.
func (tr *ortTree) norm(text string) string {
	if o, ok := tr.back[text]; ok {
		text = o
	}
	return strings.ReplaceAll(text, tr.root, "$ABS")
}

// ids names every entry of the tree by its path below top, by inode.
func (tr *ortTree) ids() map[[2]uint64]string {
	m := map[[2]uint64]string{}
	filepath.WalkDir(tr.top, func(p string, d fs.DirEntry, err error) error {
		var st unix.Stat_t
		if err == nil && unix.Lstat(p, &st) == nil {
			rel, _ := filepath.Rel(tr.top, p)
			m[[2]uint64{uint64(st.Dev), st.Ino}] = rel
		}
		return nil
	})
	return m
}

func (tr *ortTree) identify(fi fs.FileInfo) string {
	var key [2]uint64
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		key = [2]uint64{uint64(st.Dev), st.Ino}
	case *unix.Stat_t:
		key = [2]uint64{uint64(st.Dev), st.Ino}
	default:
		return "no stat"
	}
	if n, ok := tr.ids()[key]; ok {
		return n
	}
	return fmt.Sprintf("outside the layout (inode %d)", key[1])
}

// snapshot lists the tree below top: directories, files with contents,
// links with their (normalized) texts.
func (tr *ortTree) snapshot() []string {
	var out []string
	filepath.WalkDir(tr.top, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == tr.top {
			return nil
		}
		rel, _ := filepath.Rel(tr.top, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out = append(out, rel+" => "+tr.norm(l))
		case d.IsDir():
			out = append(out, rel+"/")
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			out = append(out, rel+" "+strconv.Quote(string(b)))
		default:
			out = append(out, rel+" "+d.Type().String())
		}
		return nil
	})
	return out
}

// ---- the three sides: the guard, os.Root, the kernel ----

type ortSide interface {
	ReadFile(string) ([]byte, error)
	Open(string) (*os.File, error)
	List(string) ([]string, error)
	Stat(string) (fs.FileInfo, error)
	Lstat(string) (fs.FileInfo, error)
	Readlink(string) (string, error)
	WriteFile(string, []byte) error
	Create(string) (*os.File, error)
	Mkdir(string) error
	Remove(string) error
	Rename(string, string) error
	Close() error
}

const ortCreateFlags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC

type ortGuard struct{ *Workspace }

func (g ortGuard) Open(n string) (*os.File, error) { return g.OpenFile(n, os.O_RDONLY, 0) }
func (g ortGuard) List(n string) ([]string, error) {
	es, _, err := g.Workspace.List(n)
	var names []string
	for _, e := range es {
		names = append(names, e.Name)
	}
	return names, err
}
func (g ortGuard) Stat(n string) (fs.FileInfo, error)    { return g.Info(n) }
func (g ortGuard) Create(n string) (*os.File, error)     { return g.OpenFile(n, ortCreateFlags, 0o666) }
func (g ortGuard) Mkdir(n string) error                  { return g.Workspace.Mkdir(n, 0o777) }
func (g ortGuard) WriteFile(n string, data []byte) error { return g.Workspace.WriteFile(n, data) }

// Remove is os.Root.Remove's "a file, or else an empty directory".
func (g ortGuard) Remove(n string) error {
	err := g.Workspace.Remove(n)
	if err != nil && g.RemoveDir(n) == nil {
		return nil
	}
	return err
}

type ortRoot struct{ *os.Root }

func (r ortRoot) List(n string) ([]string, error) {
	f, err := r.Root.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
func (r ortRoot) WriteFile(n string, data []byte) error { return r.Root.WriteFile(n, data, 0o666) }
func (r ortRoot) Create(n string) (*os.File, error)     { return r.OpenFile(n, ortCreateFlags, 0o666) }
func (r ortRoot) Mkdir(n string) error                  { return r.Root.Mkdir(n, 0o777) }

// ortKernel is the plain system calls on the absolute path, as Go's
// consistency tests use them (Rename is rename(2) itself: os.Rename adds a
// check of its own).
type ortKernel struct{ root string }

func (k ortKernel) abs(n string) string {
	if n == "" || filepath.IsAbs(n) {
		return n
	}
	return k.root + "/" + n
}
func (k ortKernel) ReadFile(n string) ([]byte, error) { return os.ReadFile(k.abs(n)) }
func (k ortKernel) Open(n string) (*os.File, error)   { return os.Open(k.abs(n)) }
func (k ortKernel) List(n string) ([]string, error) {
	f, err := os.Open(k.abs(n))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
func (k ortKernel) Stat(n string) (fs.FileInfo, error)  { return os.Stat(k.abs(n)) }
func (k ortKernel) Lstat(n string) (fs.FileInfo, error) { return os.Lstat(k.abs(n)) }
func (k ortKernel) Readlink(n string) (string, error)   { return os.Readlink(k.abs(n)) }
func (k ortKernel) WriteFile(n string, data []byte) error {
	return os.WriteFile(k.abs(n), data, 0o666)
}
func (k ortKernel) Create(n string) (*os.File, error) {
	return os.OpenFile(k.abs(n), ortCreateFlags, 0o666)
}
func (k ortKernel) Mkdir(n string) error         { return os.Mkdir(k.abs(n), 0o777) }
func (k ortKernel) Remove(n string) error        { return os.Remove(k.abs(n)) }
func (k ortKernel) Rename(from, to string) error { return unix.Rename(k.abs(from), k.abs(to)) }
func (k ortKernel) Close() error                 { return nil }

// ortOutcome is what one side did: failed or reached something, and, for
// a change, the tree it left.
type ortOutcome struct {
	err  error
	res  string
	tree []string
	// note, for a WriteFile through a symlink in the last component to
	// an existing file, says whether the file was replaced (a new inode)
	// or written in place. It is not compared.
	note string
}

func (o ortOutcome) same(p ortOutcome) bool {
	return (o.err == nil) == (p.err == nil) && o.res == p.res && slices.Equal(o.tree, p.tree)
}

func (o ortOutcome) String() string {
	s := o.res
	switch {
	case o.err != nil:
		s = "failed: " + o.err.Error()
	case s == "":
		s = "succeeded"
	}
	if o.tree != nil {
		s += fmt.Sprintf(", leaving %q", o.tree)
	}
	return s
}

func (tr *ortTree) describe(fi fs.FileInfo) string {
	s := fmt.Sprintf("%s (name %q, mode %v", tr.identify(fi), fi.Name(), fi.Mode())
	if fi.Mode().IsRegular() {
		s += fmt.Sprintf(", size %d", fi.Size())
	}
	return s + ")"
}

func (tr *ortTree) describeFile(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return "unstattable: " + err.Error()
	}
	s := tr.identify(fi)
	if fi.IsDir() {
		names, err := f.Readdirnames(-1)
		slices.Sort(names)
		s += fmt.Sprintf(" listing %q", names)
		if err != nil {
			s += " (" + err.Error() + ")"
		}
	}
	return s
}

func ortPerform(op string, s ortSide, tr *ortTree, name, from string) ortOutcome {
	var o ortOutcome
	switch op {
	case "read":
		var b []byte
		if b, o.err = s.ReadFile(name); o.err == nil {
			o.res = "read " + strconv.Quote(string(b))
		}
	case "open":
		var f *os.File
		if f, o.err = s.Open(name); o.err == nil {
			o.res = "opened " + tr.describeFile(f)
			f.Close()
		}
	case "list":
		var names []string
		if names, o.err = s.List(name); o.err == nil {
			slices.Sort(names)
			o.res = fmt.Sprintf("listed %q", names)
		}
	case "info", "lstat":
		var fi fs.FileInfo
		if op == "info" {
			fi, o.err = s.Stat(name)
		} else {
			fi, o.err = s.Lstat(name)
		}
		if o.err == nil {
			o.res = "reached " + tr.describe(fi)
		}
	case "stat":
		// The guard's Stat returns an Entry; the others a FileInfo.
		if g, ok := s.(ortGuard); ok {
			var e Entry
			if e, o.err = g.Workspace.Stat(name); o.err == nil {
				o.res = ortEntry(e.Name, e.Type, e.Size)
			}
		} else {
			var fi fs.FileInfo
			if fi, o.err = s.Stat(name); o.err == nil {
				o.res = ortEntry(fi.Name(), typeOf(uint32(fi.Sys().(*syscall.Stat_t).Mode)), fi.Size())
			}
		}
	case "readlink":
		var l string
		if l, o.err = s.Readlink(name); o.err == nil {
			o.res = "link text " + strconv.Quote(tr.norm(l))
		}
	case "writefile":
		p := ortKernel{tr.root}.abs(name)
		var lst, st1, st2 unix.Stat_t
		through := unix.Lstat(p, &lst) == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK &&
			unix.Stat(p, &st1) == nil && st1.Mode&unix.S_IFMT == unix.S_IFREG
		o.err = s.WriteFile(name, []byte("data"))
		if through && o.err == nil && unix.Stat(p, &st2) == nil {
			o.note = "in place"
			if st2.Ino != st1.Ino {
				o.note = "replaced (new inode)"
			}
		}
	case "create":
		var f *os.File
		if f, o.err = s.Create(name); o.err == nil {
			_, o.err = f.Write([]byte("data"))
			if err := f.Close(); o.err == nil {
				o.err = err
			}
		}
	case "mkdir":
		o.err = s.Mkdir(name)
	case "remove":
		o.err = s.Remove(name)
	case "rename-from":
		o.err = s.Rename(name, "destination")
	case "rename-to":
		o.err = s.Rename("source", name)
	case "rename":
		o.err = s.Rename(from, name)
	default:
		panic("unknown op " + op)
	}
	if !slices.Contains(ortReadOps, op) {
		o.tree = tr.snapshot()
	}
	return o
}

func ortEntry(name, typ string, size int64) string {
	s := fmt.Sprintf("entry %q type %s", name, typ)
	if typ == "file" {
		s += fmt.Sprintf(" size %d", size)
	}
	return s
}

// ---- the replay ----

type ortStats struct {
	replayed, agreed, bothFailed, documented, departures, failures, skipped int
	byKind                                                                  map[string]int
	// linkWrites counts, per side, WriteFiles through a symlink in the
	// last component to an existing file, by what happened to the file.
	linkWrites map[string]int
}

type ortReplayer struct {
	t     *testing.T
	base  string
	stats ortStats
}

// ortRun is one operation of one case.
type ortRun struct {
	c      ortCase
	op     string
	layout []string
}

type ortMode struct {
	rewriteAbs, relative bool
	mkdirs               []string // below top, made before the operation
}

func (rp *ortReplayer) fresh(layout []string, rewrite bool) *ortTree {
	tr, err := ortBuild(rp.base, layout, rewrite)
	if err != nil {
		rp.t.Fatalf("building layout %q: %v", layout, err)
	}
	return tr
}

// guard runs the operation through the guard on a fresh copy, and returns
// the tree before it too.
func (rp *ortReplayer) guard(x ortRun) (ortOutcome, []string) {
	tr := rp.fresh(x.layout, false)
	defer tr.remove()
	w, err := Open(tr.root)
	if err != nil {
		rp.t.Fatalf("workspace.Open(%s): %v", tr.root, err)
	}
	defer w.Close()
	before := tr.snapshot()
	return ortPerform(x.op, ortGuard{w}, tr, tr.name(x.c.open, false), tr.name(x.c.from, false)), before
}

func (rp *ortReplayer) root(x ortRun, m ortMode) ortOutcome {
	tr := rp.fresh(x.layout, m.rewriteAbs)
	defer tr.remove()
	for _, d := range m.mkdirs {
		if err := os.Mkdir(filepath.Join(tr.top, d), 0o777); err != nil {
			rp.t.Fatalf("preparing the replay: %v", err)
		}
	}
	r, err := os.OpenRoot(tr.root)
	if err != nil {
		rp.t.Fatalf("os.OpenRoot(%s): %v", tr.root, err)
	}
	defer r.Close()
	return ortPerform(x.op, ortRoot{r}, tr, tr.name(x.c.open, m.relative), tr.name(x.c.from, m.relative))
}

func (rp *ortReplayer) kernel(x ortRun) ortOutcome {
	tr := rp.fresh(x.layout, false)
	defer tr.remove()
	return ortPerform(x.op, ortKernel{tr.root}, tr, tr.name(x.c.open, false), tr.name(x.c.from, false))
}

func (rp *ortReplayer) replay(c ortCase) {
	// The read-only operations share one copy of the layout per side.
	var gtr, rtr *ortTree
	var w *Workspace
	var root *os.Root
	defer func() {
		if gtr != nil {
			w.Close()
			root.Close()
			gtr.remove()
			rtr.remove()
		}
	}()
	for _, op := range c.ops {
		x := ortRun{c: c, op: op, layout: c.fs}
		switch op {
		case "rename-from":
			if ortHas(c.fs, "destination") {
				rp.stats.skipped++
				continue
			}
		case "rename-to":
			if ortHas(c.fs, "source") {
				rp.stats.skipped++
				continue
			}
			x.layout = append(slices.Clone(c.fs), "source")
		}
		if !slices.Contains(ortReadOps, op) {
			g, before := rp.guard(x)
			rp.judge(x, g, before, rp.root(x, ortMode{}))
			continue
		}
		if gtr == nil {
			gtr, rtr = rp.fresh(c.fs, false), rp.fresh(c.fs, false)
			var err error
			if w, err = Open(gtr.root); err != nil {
				rp.t.Fatalf("workspace.Open(%s): %v", gtr.root, err)
			}
			if root, err = os.OpenRoot(rtr.root); err != nil {
				rp.t.Fatalf("os.OpenRoot(%s): %v", rtr.root, err)
			}
		}
		g := ortPerform(op, ortGuard{w}, gtr, gtr.name(c.open, false), gtr.name(c.from, false))
		r := ortPerform(op, ortRoot{root}, rtr, rtr.name(c.open, false), rtr.name(c.from, false))
		rp.judge(x, g, nil, r)
	}
}

func ortHas(layout []string, name string) bool {
	for _, e := range layout {
		n, _, _ := strings.Cut(e, " => ")
		if strings.TrimSuffix(n, "/") == name {
			return true
		}
	}
	return false
}

// judge compares the guard's outcome g (and the tree before it, for a
// change) with os.Root's r, and classifies a disagreement.
func (rp *ortReplayer) judge(x ortRun, g ortOutcome, before []string, r ortOutcome) {
	t, s := rp.t, &rp.stats
	s.replayed++
	if s.linkWrites == nil {
		s.linkWrites = map[string]int{}
	}
	if g.note != "" {
		s.linkWrites["guard "+g.note]++
	}
	if r.note != "" {
		s.linkWrites["os.Root "+r.note]++
	}
	if g.same(r) {
		s.agreed++
		if g.err != nil {
			s.bothFailed++
		}
		return
	}
	desc := fmt.Sprintf("%s: %s %s", x.c.label, x.op, ortQuotePaths(x.c))
	documented := func(kind string, replayed ortOutcome) {
		s.documented++
		if s.byKind == nil {
			s.byKind = map[string]int{}
		}
		s.byKind[kind]++
		t.Logf("documented difference %s — %s: guard %s; os.Root %s; os.Root replayed without the difference %s", kind, desc, g, r, replayed)
	}

	// D1 and D2: replay os.Root with the absolute link made relative,
	// the absolute name made relative, or both.
	absLink := slices.ContainsFunc(x.layout, func(e string) bool {
		_, l, ok := strings.Cut(e, " => ")
		return ok && (l == "$ABS" || strings.HasPrefix(l, "$ABS/"))
	})
	absName := strings.HasPrefix(x.c.open, "$ABS") || strings.HasPrefix(x.c.from, "$ABS")
	var modes []ortMode
	var kinds []string
	if absName {
		modes, kinds = append(modes, ortMode{relative: true}), append(kinds, "D2 (absolute name)")
	}
	if absLink {
		modes, kinds = append(modes, ortMode{rewriteAbs: true}), append(kinds, "D1 (absolute symlink inside)")
	}
	if absName && absLink {
		modes, kinds = append(modes, ortMode{rewriteAbs: true, relative: true}), append(kinds, "D1+D2 (absolute symlink inside, absolute name)")
	}
	// rd is os.Root with every applicable difference taken out.
	rd, rdKind := r, ""
	for i, m := range modes {
		r2 := rp.root(x, m)
		if g.same(r2) {
			documented(kinds[i], r2)
			return
		}
		rd, rdKind = r2, kinds[i]
	}

	// D3: WriteFile creates missing parents. Replay os.Root with the
	// directories the guard made made first.
	if x.op == "writefile" && g.err == nil {
		var mkdirs []string
		for _, e := range g.tree {
			if strings.HasSuffix(e, "/") && !slices.Contains(before, e) {
				mkdirs = append(mkdirs, strings.TrimSuffix(e, "/"))
			}
		}
		if len(mkdirs) > 0 {
			slices.SortFunc(mkdirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
			m := ortMode{rewriteAbs: absLink, relative: absName, mkdirs: mkdirs}
			if r3 := rp.root(x, m); g.same(r3) {
				kind := "D3 (WriteFile creates missing parents)"
				if absLink || absName {
					kind += " with D1/D2"
				}
				documented(kind, r3)
				return
			}
		}
	}

	// D4: harness state.
	if errors.Is(g.err, ErrHarnessState) {
		documented("D4 (harness state)", r)
		return
	}

	// os.Root departing from the kernel: raw system calls on the absolute
	// path agree with the guard, os.Root refused no escape, and the guard
	// stayed inside the root. The raw calls are confined by nothing, so
	// they are made only for a path os.Root did not find escaping.
	inside := !strings.Contains(g.res, "outside the layout") && !slices.ContainsFunc(g.tree, func(e string) bool {
		return e != "ROOT/" && !strings.HasPrefix(e, "ROOT/")
	})
	var k ortOutcome
	if !ortEscapes(rd.err) && inside {
		k = rp.kernel(x)
	}
	if !ortEscapes(rd.err) && inside && g.same(k) {
		s.departures++
		if rdKind == "" {
			t.Logf("os.Root departs from the kernel — %s: guard and kernel %s; os.Root %s (layout %q)", desc, g, r, x.layout)
		} else {
			t.Logf("os.Root departs from the kernel, with documented difference %s — %s: guard and kernel %s; os.Root %s; os.Root without the difference %s (layout %q)", rdKind, desc, g, r, rd, x.layout)
		}
		return
	}
	s.failures++
	without := ""
	if rdKind != "" {
		without = fmt.Sprintf("\n\tos.Root without %s: %s", rdKind, rd)
	}
	t.Errorf("disagreement — %s (layout %q):\n\tguard:   %s\n\tos.Root: %s%s\n\tkernel:  %s", desc, x.layout, g, r, without, k)
}

func ortQuotePaths(c ortCase) string {
	if c.from != "" {
		return strconv.Quote(c.from) + " → " + strconv.Quote(c.open)
	}
	return strconv.Quote(c.open)
}

// ortEscapes reports whether os.Root refused err because the path escapes
// the root (os's errPathEscapes is not exported).
func ortEscapes(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}
