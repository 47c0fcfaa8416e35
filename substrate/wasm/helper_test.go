package wasm

func helperMain() bool { return false }
