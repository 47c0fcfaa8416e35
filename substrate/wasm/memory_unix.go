//go:build unix

package wasm

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// mmapAllocator backs each module instance's memory with its own
// anonymous mapping of the instance's maximum size. Only the pages the
// module touches become resident; growing never copies (a growing Go
// slice would hold the old and the new buffer at once), a fresh instance
// starts on fresh zero pages without clearing them, and the whole mapping
// is returned to the kernel when the instance closes: cordon's memory
// goes back to where it was after every call.
var mmapAllocator = experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
	size := max
	if size < PageSize {
		size = PageSize
	}
	buf, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|mapNoReserve)
	if err != nil {
		return &sliceMemory{} // wazero's own strategy: a growing Go slice, still capped
	}
	return &mmapMemory{buf: buf}
})

type mmapMemory struct{ buf []byte }

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size]
}

func (m *mmapMemory) Free() {
	if m.buf != nil {
		unix.Munmap(m.buf)
		m.buf = nil
	}
}

// sliceMemory is a linear memory in the Go heap.
type sliceMemory struct{ buf []byte }

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		m.buf = append(m.buf[:cap(m.buf)], make([]byte, size-uint64(cap(m.buf)))...)
	}
	m.buf = m.buf[:size]
	return m.buf
}

func (m *sliceMemory) Free() { m.buf = nil }

func withMemoryAllocator(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, mmapAllocator)
}
