package wasm

import "golang.org/x/sys/unix"

const mapNoReserve = unix.MAP_NORESERVE
