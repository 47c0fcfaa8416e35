package main

import (
	"os"
	"testing"

	"github.com/cordon-run/cordon/internal/wasmtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	wasmtest.RemoveBuilds()
	os.Exit(code)
}
