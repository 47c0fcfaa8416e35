package capabilities

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Binary size units.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

var units = []struct {
	suffix string
	n      int64
}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}}

// ParseSize parses plain bytes ("65536") or a whole number of KiB, MiB, GiB
// or TiB ("64KiB") in 1..[MaxSize]. A value that overflows is an error
// wrapping [ErrRange]; a malformed one wraps [ErrSyntax].
func ParseSize(s string) (int64, error) {
	digits, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			digits, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" || len(digits) > 1 && digits[0] == '0' {
		return 0, &valueError{ErrSyntax, fmt.Sprintf("%q is not a size (write bytes, or a whole number of KiB, MiB, GiB or TiB, e.g. 64KiB)", shorten(s))}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > MaxSize/mult {
		return 0, &valueError{ErrRange, fmt.Sprintf("%s is out of range: a size must be more than 0 and at most %s", shorten(s), FormatSize(MaxSize))}
	}
	n *= mult
	if n <= 0 {
		return 0, &valueError{ErrRange, fmt.Sprintf("%s is out of range: a size must be more than 0 and at most %s", shorten(s), FormatSize(MaxSize))}
	}
	return n, nil
}

// FormatSize prints n in the largest binary unit that divides it exactly,
// or as plain bytes.
func FormatSize(n int64) string {
	if n > 0 {
		for _, u := range units {
			if n%u.n == 0 {
				return strconv.FormatInt(n/u.n, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseDuration parses a duration in Go's syntax ("10s", "1m30s",
// "500ms") in (0, [MaxDuration]].
func ParseDuration(s string) (time.Duration, error) {
	if len(s) > 32 {
		return 0, &valueError{ErrSyntax, fmt.Sprintf("%q is not a duration (write e.g. 10s, 1m30s or 500ms)", shorten(s))}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &valueError{ErrSyntax, fmt.Sprintf("%q is not a duration (write e.g. 10s, 1m30s or 500ms)", shorten(s))}
	}
	if d <= 0 || d > MaxDuration {
		return 0, &valueError{ErrRange, fmt.Sprintf("%s is out of range: a time limit must be more than 0 and at most %s", s, FormatDuration(MaxDuration))}
	}
	return d, nil
}

// FormatDuration prints d as [time.Duration.String] does, without zero
// trailing units: "1h", "1h30m", "1m30s", "500ms".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
