//go:build !linux

package main

func denyNamespaces() {}

const envNoUserNS = "CORDON_TEST_NO_USERNS"
