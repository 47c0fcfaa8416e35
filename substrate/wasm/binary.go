package wasm

import (
	"errors"
	"fmt"
)

// importKind is the kind byte of an import entry.
type importKind byte

const (
	kindFunc   importKind = 0
	kindTable  importKind = 1
	kindMemory importKind = 2
	kindGlobal importKind = 3
	kindTag    importKind = 4
)

func (k importKind) String() string {
	switch k {
	case kindFunc:
		return "function"
	case kindTable:
		return "table"
	case kindMemory:
		return "memory"
	case kindGlobal:
		return "global"
	case kindTag:
		return "tag"
	}
	return fmt.Sprintf("kind %d", byte(k))
}

// Import is one import of a module.
type Import struct {
	Module, Name string
	Kind         string // "function", "memory", "table", "global"
	// Params and Results are the value types of a function import
	// ("i32", "i64", "f32", "f64", ...).
	Params, Results []string
}

// String is "module.name".
func (i Import) String() string { return i.Module + "." + i.Name }

// Limits on what the reader accepts, against hostile modules.
const (
	maxImports = 10000
	maxTypes   = 100000
	maxParams  = 1000
)

var errMalformed = errors.New("malformed module")

// readImports reads the import section of a WebAssembly binary and the
// types of its function imports. It reads only the type and import
// sections; whether the rest of the module is valid is for the compiler to
// say.
func readImports(bin []byte) ([]Import, error) {
	r := &reader{b: bin}
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a WebAssembly binary", errMalformed)
	}
	if bin[4] != 1 || bin[5] != 0 || bin[6] != 0 || bin[7] != 0 {
		return nil, fmt.Errorf("%w: not a version 1 core module (a component?)", errMalformed)
	}
	r.off = 8
	var types [][2][]string
	var imports []Import
	for r.off < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(r.off)+uint64(size) > uint64(len(r.b)) {
			return nil, fmt.Errorf("%w: section %d overruns the module", errMalformed, id)
		}
		sec := &reader{b: r.b[:r.off+int(size)], off: r.off}
		r.off += int(size)
		switch id {
		case 1: // types
			n := sec.u32()
			if n > maxTypes {
				return nil, fmt.Errorf("%w: %d types", errMalformed, n)
			}
			for i := uint32(0); i < n && sec.err == nil; i++ {
				if form := sec.byte(); form != 0x60 {
					return nil, fmt.Errorf("%w: type %d is not a function type (0x%02x)", errMalformed, i, form)
				}
				params := sec.valtypes()
				results := sec.valtypes()
				types = append(types, [2][]string{params, results})
			}
		case 2: // imports
			n := sec.u32()
			if n > maxImports {
				return nil, fmt.Errorf("%w: %d imports", errMalformed, n)
			}
			for i := uint32(0); i < n && sec.err == nil; i++ {
				imp := Import{Module: sec.name(), Name: sec.name()}
				k := importKind(sec.byte())
				imp.Kind = k.String()
				switch k {
				case kindFunc:
					t := sec.u32()
					if sec.err == nil {
						if int(t) >= len(types) {
							return nil, fmt.Errorf("%w: import %s has type %d of %d", errMalformed, imp, t, len(types))
						}
						imp.Params, imp.Results = types[t][0], types[t][1]
					}
				case kindTable:
					sec.byte()
					sec.limits()
				case kindMemory:
					sec.limits()
				case kindGlobal:
					sec.byte()
					sec.byte()
				case kindTag:
					sec.byte()
					sec.u32()
				default:
					return nil, fmt.Errorf("%w: import %s has unknown kind %d", errMalformed, imp, k)
				}
				imports = append(imports, imp)
			}
			return imports, sec.errorf()
		}
		if sec.err != nil {
			return nil, sec.errorf()
		}
		if id > 2 && id != 0 {
			break // imports come before every section after them
		}
	}
	return imports, r.errorf()
}

// reader decodes LEB128 numbers, names and value types, recording the
// first error.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) errorf() error {
	if r.err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v at byte %d", errMalformed, r.err, r.off)
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) u32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > 0xffffffff {
				r.err = errors.New("number overflows 32 bits")
				return 0
			}
			return uint32(v)
		}
	}
	r.err = errors.New("number too long")
	return 0
}

func (r *reader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		r.err = errors.New("name overruns the section")
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}

func (r *reader) valtypes() []string {
	n := r.u32()
	if n > maxParams {
		r.err = fmt.Errorf("%d value types", n)
		return nil
	}
	var ts []string
	for i := uint32(0); i < n && r.err == nil; i++ {
		ts = append(ts, valtypeName(r.byte()))
	}
	return ts
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

func valtypeName(b byte) string {
	switch b {
	case 0x7f:
		return "i32"
	case 0x7e:
		return "i64"
	case 0x7d:
		return "f32"
	case 0x7c:
		return "f64"
	case 0x7b:
		return "v128"
	case 0x70:
		return "funcref"
	case 0x6f:
		return "externref"
	}
	return fmt.Sprintf("0x%02x", b)
}
