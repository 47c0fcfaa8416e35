//go:build !linux

package bwrap

import (
	"errors"
	"syscall"
)

// closeOnExecAll has nothing to do where bwrap does not run.
func closeOnExecAll() error { return nil }

func nsInode(string, string) (uint64, error) { return 0, errors.ErrUnsupported }

func pipeUnread(int) (int, error) { return 0, errors.ErrUnsupported }

func bwrapAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func pipeCapacity(uintptr) (int, error) { return 0, errors.ErrUnsupported }

// localTimes is false here: a check of the bwrap program is not remembered.
func localTimes(string) bool { return false }
