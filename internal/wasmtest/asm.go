// Package wasmtest builds WebAssembly modules for cordon's tests: small
// modules assembled instruction by instruction (an infinite loop, a memory
// hog, a call with hostile pointers), and Go programs compiled with
// GOOS=wasip1.
package wasmtest

import (
	"encoding/binary"
	"math"
)

// Value types.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
)

// Module is a module under construction. The zero value is an empty module.
type Module struct {
	types   [][2][]byte
	imports []imp
	funcs   []fn
	mem     *[2]uint32 // min, max (max 0: none)
	exports []export
	data    []seg
	globals []global
}

type imp struct {
	module, name string
	typ          uint32
}

type fn struct {
	typ    uint32
	locals []byte
	body   []byte
}

type export struct {
	name string
	kind byte
	idx  uint32
}

type seg struct {
	off  uint32
	data []byte
}

type global struct {
	typ  byte
	init int64
}

func (m *Module) typeOf(params, results []byte) uint32 {
	for i, t := range m.types {
		if string(t[0]) == string(params) && string(t[1]) == string(results) {
			return uint32(i)
		}
	}
	m.types = append(m.types, [2][]byte{params, results})
	return uint32(len(m.types) - 1)
}

// Import adds a function import and returns its function index. Imports
// must be added before functions.
func (m *Module) Import(module, name string, params, results []byte) uint32 {
	if len(m.funcs) > 0 {
		panic("wasmtest: imports come before functions")
	}
	m.imports = append(m.imports, imp{module, name, m.typeOf(params, results)})
	return uint32(len(m.imports) - 1)
}

// Func adds a function with the given locals and body (without the final
// end) and returns its index.
func (m *Module) Func(params, results, locals []byte, body ...[]byte) uint32 {
	var b []byte
	for _, part := range body {
		b = append(b, part...)
	}
	m.funcs = append(m.funcs, fn{typ: m.typeOf(params, results), locals: locals, body: append(b, 0x0b)})
	return uint32(len(m.imports) + len(m.funcs) - 1)
}

// Memory declares the module's memory (max 0: no maximum) and exports it
// as "memory".
func (m *Module) Memory(min, max uint32) {
	m.mem = &[2]uint32{min, max}
	m.exports = append(m.exports, export{"memory", 2, 0})
}

// Global adds a mutable global of type typ and returns its index.
func (m *Module) Global(typ byte, init int64) uint32 {
	m.globals = append(m.globals, global{typ, init})
	return uint32(len(m.globals) - 1)
}

// ExportFunc exports function idx as name.
func (m *Module) ExportFunc(name string, idx uint32) {
	m.exports = append(m.exports, export{name, 0, idx})
}

// Data places data in memory at off.
func (m *Module) Data(off uint32, data []byte) {
	m.data = append(m.data, seg{off, data})
}

// Bytes encodes the module.
func (m *Module) Bytes() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	section := func(id byte, body []byte) {
		out = append(out, id)
		out = uleb(out, uint64(len(body)))
		out = append(out, body...)
	}
	var b []byte
	b = uleb(b, uint64(len(m.types)))
	for _, t := range m.types {
		b = append(b, 0x60)
		b = uleb(b, uint64(len(t[0])))
		b = append(b, t[0]...)
		b = uleb(b, uint64(len(t[1])))
		b = append(b, t[1]...)
	}
	section(1, b)
	if len(m.imports) > 0 {
		b = uleb(nil, uint64(len(m.imports)))
		for _, i := range m.imports {
			b = name(b, i.module)
			b = name(b, i.name)
			b = append(b, 0)
			b = uleb(b, uint64(i.typ))
		}
		section(2, b)
	}
	b = uleb(nil, uint64(len(m.funcs)))
	for _, f := range m.funcs {
		b = uleb(b, uint64(f.typ))
	}
	section(3, b)
	if m.mem != nil {
		b = uleb(nil, 1)
		if m.mem[1] == 0 {
			b = append(b, 0)
			b = uleb(b, uint64(m.mem[0]))
		} else {
			b = append(b, 1)
			b = uleb(b, uint64(m.mem[0]))
			b = uleb(b, uint64(m.mem[1]))
		}
		section(5, b)
	}
	if len(m.globals) > 0 {
		b = uleb(nil, uint64(len(m.globals)))
		for _, g := range m.globals {
			b = append(b, g.typ, 1)
			if g.typ == I64 {
				b = append(b, I64Const(g.init)...)
			} else {
				b = append(b, I32Const(int32(g.init))...)
			}
			b = append(b, 0x0b)
		}
		section(6, b)
	}
	b = uleb(nil, uint64(len(m.exports)))
	for _, e := range m.exports {
		b = name(b, e.name)
		b = append(b, e.kind)
		b = uleb(b, uint64(e.idx))
	}
	section(7, b)
	b = uleb(nil, uint64(len(m.funcs)))
	for _, f := range m.funcs {
		var body []byte
		if len(f.locals) == 0 {
			body = uleb(body, 0)
		} else {
			body = uleb(body, uint64(len(f.locals)))
			for _, l := range f.locals {
				body = append(body, 1, l)
			}
		}
		body = append(body, f.body...)
		b = uleb(b, uint64(len(body)))
		b = append(b, body...)
	}
	section(10, b)
	if len(m.data) > 0 {
		b = uleb(nil, uint64(len(m.data)))
		for _, d := range m.data {
			b = append(b, 0)
			b = append(b, I32Const(int32(d.off))...)
			b = append(b, 0x0b)
			b = uleb(b, uint64(len(d.data)))
			b = append(b, d.data...)
		}
		section(11, b)
	}
	return out
}

func uleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
		} else {
			return append(b, c)
		}
	}
}

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func name(b []byte, s string) []byte {
	b = uleb(b, uint64(len(s)))
	return append(b, s...)
}

// Instructions.

func I32Const(v int32) []byte     { return sleb([]byte{0x41}, int64(v)) }
func I64Const(v int64) []byte     { return sleb([]byte{0x42}, v) }
func U32(v uint32) []byte         { return I32Const(int32(v)) }
func Call(idx uint32) []byte      { return uleb([]byte{0x10}, uint64(idx)) }
func LocalGet(i uint32) []byte    { return uleb([]byte{0x20}, uint64(i)) }
func LocalSet(i uint32) []byte    { return uleb([]byte{0x21}, uint64(i)) }
func GlobalGet(i uint32) []byte   { return uleb([]byte{0x23}, uint64(i)) }
func GlobalSet(i uint32) []byte   { return uleb([]byte{0x24}, uint64(i)) }
func Br(depth uint32) []byte      { return uleb([]byte{0x0c}, uint64(depth)) }
func BrIf(depth uint32) []byte    { return uleb([]byte{0x0d}, uint64(depth)) }
func I32Store(off uint32) []byte  { return uleb([]byte{0x36, 2}, uint64(off)) }
func I32Load(off uint32) []byte   { return uleb([]byte{0x28, 2}, uint64(off)) }
func I32Store8(off uint32) []byte { return uleb([]byte{0x3a, 0}, uint64(off)) }

var (
	Loop        = []byte{0x03, 0x40}
	Block       = []byte{0x02, 0x40}
	If          = []byte{0x04, 0x40}
	End         = []byte{0x0b}
	Drop        = []byte{0x1a}
	Unreachable = []byte{0x00}
	MemoryGrow  = []byte{0x40, 0}
	MemorySize  = []byte{0x3f, 0}
	I32Add      = []byte{0x6a}
	I32Sub      = []byte{0x6b}
	I32Eq       = []byte{0x46}
	I32Eqz      = []byte{0x45}
	I32LtU      = []byte{0x49}
	I64Add      = []byte{0x7c}
)

// Le32 encodes v little-endian, for data segments.
func Le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// Le64 encodes v little-endian, for data segments.
func Le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// MaxU32 is the largest address, for out-of-bounds pointers.
const MaxU32 = math.MaxUint32
