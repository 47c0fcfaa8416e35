//go:build !wasip1

package cordon

// WriteFile fails outside WebAssembly.
func WriteFile(name string, data []byte) error { return ErrNotWasm }

// Log does nothing outside WebAssembly.
func Log(level int, msg string) {}
