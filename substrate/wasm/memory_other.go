//go:build !unix

package wasm

import "context"

func withMemoryAllocator(ctx context.Context) context.Context { return ctx }
