//go:build !cordon_front

package main

// frontEnd is false: this is the full binary, which runs every command
// (front.go is the front end's).
const frontEnd = false
