package main

import (
	"os"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// shown makes a name or text that a tool could have chosen (a file in the
// workspace, a field of a receipt nobody verified yet) safe to print on a
// terminal: when it holds a character that does not print (an escape
// sequence, a carriage return, a newline that would forge a line, a bidi
// override) or bytes that are not UTF-8, it is written with Go's escapes,
// without quotes; anything else prints unchanged. --json output needs
// none of this: JSON escapes control characters itself.
func shown(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), getTermios)
	return err == nil
}
