//go:build !linux

package main

import "errors"

// mountOfItsOwn cannot tell a file's mount here: the front end hands
// nothing off on this system.
func mountOfItsOwn(self, dir string) (bool, error) {
	return false, errors.New("this system gives no mount ID of a file")
}
