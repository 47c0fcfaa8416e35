package capabilities

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// Set is a list of capabilities in canonical order, without duplicates or
// contradictions. The zero Set is empty: it grants nothing. A Set is
// immutable; its methods return copies.
type Set struct {
	caps []Capability
}

// single lists the kinds a set holds at most once.
var single = map[Kind]string{
	KindNet:    "there is one network setting",
	KindTime:   "there is one time limit",
	KindOutput: "there is one output limit",
	KindMemory: "there is one memory limit",
	KindTmp:    "there is one /tmp size",
	KindPids:   "there is one process limit",
	KindCPU:    "there is one processor time limit",
}

// NewSet returns the set of caps. Duplicates ([ErrDuplicate]) and
// contradictions ([ErrConflict]: net:none or net:host together with
// net.connect, or two values of a kind that has one, such as two time:
// limits) are errors; every problem is reported, joined with
// [errors.Join], each an [*Error].
func NewSet(caps ...Capability) (Set, error) {
	var errs []error
	var out []Capability
	for _, c := range caps { // in the order given: the later of two is the one reported
		if c.IsZero() {
			errs = append(errs, &Error{Err: ErrSyntax, Reason: "empty capability"})
			continue
		}
		if slices.Contains(out, c) {
			errs = append(errs, fail(c.String(), ErrDuplicate, "asked for twice"))
			continue
		}
		if why, ok := single[c.kind]; ok {
			if prev, found := find(out, c.kind); found {
				errs = append(errs, fail(c.String(), ErrConflict, "conflicts with %s: %s; ask for one", prev, why))
				continue
			}
		}
		if c.kind == KindNetConnect || c.kind == KindNet {
			other := KindNet
			if c.kind == KindNet {
				other = KindNetConnect
			}
			if prev, found := find(out, other); found {
				net, conn := prev, c
				if c.kind == KindNet {
					net, conn = c, prev
				}
				why := "net:none forbids every connection"
				if net.arg == NetHost {
					why = "net:host already allows every connection"
				}
				errs = append(errs, fail(c.String(), ErrConflict, "conflicts with %s: %s that %s would allow; ask for one of them", prev, why, conn))
				continue
			}
		}
		out = append(out, c)
	}
	if len(errs) > 0 {
		return Set{}, errors.Join(errs...)
	}
	slices.SortStableFunc(out, compare)
	return Set{caps: out}, nil
}

// ParseSet parses each string with [Parse] and builds a [Set]. Every
// problem is reported, joined with [errors.Join].
func ParseSet(ss []string) (Set, error) {
	var caps []Capability
	var errs []error
	for _, s := range ss {
		c, err := Parse(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		caps = append(caps, c)
	}
	set, err := NewSet(caps...)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Set{}, errors.Join(errs...)
	}
	return set, nil
}

// MustParseSet is [ParseSet] for literals in programs and tests; it panics
// on an error.
func MustParseSet(ss ...string) Set {
	s, err := ParseSet(ss)
	if err != nil {
		panic(err)
	}
	return s
}

// compare orders by kind (the order of [Kinds]), then by value: ports and
// sizes numerically, names alphabetically.
func compare(a, b Capability) int {
	if d := a.kind.rank() - b.kind.rank(); d != 0 {
		return d
	}
	if a.kind == KindNetConnect {
		ap, bp := a.Port() != 0, b.Port() != 0
		if ap != bp {
			if ap {
				return -1
			}
			return 1
		}
	}
	if a.num != b.num {
		if a.num < b.num {
			return -1
		}
		return 1
	}
	return strings.Compare(a.arg, b.arg)
}

func find(caps []Capability, k Kind) (Capability, bool) {
	for _, c := range caps {
		if c.kind == k {
			return c, true
		}
	}
	return Capability{}, false
}

// Len returns the number of capabilities.
func (s Set) Len() int { return len(s.caps) }

// All returns the capabilities in canonical order.
func (s Set) All() []Capability { return slices.Clone(s.caps) }

// Has reports whether s holds c.
func (s Set) Has(c Capability) bool { return slices.Contains(s.caps, c) }

// Of returns the capabilities of kind k, in canonical order.
func (s Set) Of(k Kind) []Capability {
	var out []Capability
	for _, c := range s.caps {
		if c.kind == k {
			out = append(out, c)
		}
	}
	return out
}

// One returns the capability of kind k, for kinds a set holds at most once
// (net, time, output, memory, pids).
func (s Set) One(k Kind) (Capability, bool) { return find(s.caps, k) }

// Strings returns the canonical spellings, in canonical order.
func (s Set) Strings() []string {
	out := make([]string, len(s.caps))
	for i, c := range s.caps {
		out[i] = c.String()
	}
	return out
}

// String joins the canonical spellings with ", "; the empty set prints as
// "(none)".
func (s Set) String() string {
	if len(s.caps) == 0 {
		return "(none)"
	}
	return strings.Join(s.Strings(), ", ")
}

// MarshalJSON encodes the set as a list of canonical strings.
func (s Set) MarshalJSON() ([]byte, error) { return json.Marshal(s.Strings()) }

// UnmarshalJSON decodes a list of strings with [ParseSet].
func (s *Set) UnmarshalJSON(data []byte) error {
	var ss []string
	if err := json.Unmarshal(data, &ss); err != nil {
		return err
	}
	set, err := ParseSet(ss)
	if err != nil {
		return err
	}
	*s = set
	return nil
}
