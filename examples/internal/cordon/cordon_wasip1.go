//go:build wasip1

package cordon

import (
	"encoding/json"
	"syscall"
	"unsafe"
)

//go:wasmimport cordon write
func hostWrite(path unsafe.Pointer, pathLen uint32, buf unsafe.Pointer, bufLen uint32) uint32

//go:wasmimport cordon log
func hostLog(level uint32, msg unsafe.Pointer, msgLen uint32) uint32

//go:wasmimport cordon error
func hostError(buf unsafe.Pointer, bufLen uint32, lenPtr unsafe.Pointer) uint32

const errnoNotcapable = 76

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// WriteFile replaces the workspace file name with data atomically (a crash
// leaves the old file or the new one), through cordon's workspace guard.
func WriteFile(name string, data []byte) error {
	p := []byte(name)
	if e := hostWrite(ptr(p), uint32(len(p)), ptr(data), uint32(len(data))); e != 0 {
		return refusal("write", name, e)
	}
	return nil
}

// Log writes one line to cordon's log of this call.
func Log(level int, msg string) {
	b := []byte(msg)
	hostLog(uint32(level), ptr(b), uint32(len(b)))
}

// refusal builds the error of a failed call, with cordon's message when
// the boundary refused it.
func refusal(op, name string, errno uint32) error {
	r := &Refusal{Errno: syscall.Errno(errno), Op: op, Path: name}
	if errno == errnoNotcapable {
		buf := make([]byte, 4096)
		var n uint32
		if hostError(ptr(buf), uint32(len(buf)), unsafe.Pointer(&n)) == 0 && n <= uint32(len(buf)) {
			json.Unmarshal(buf[:n], r)
		}
	}
	return r
}
