//go:build !linux

package main

func withSessionKey(string) {}
