package roots

// FailAt makes the next applies fail just before the change at path goes
// into place, until the returned function is called.
func FailAt(path string, err error) (restore func()) {
	stepHook = func(p string) error {
		if p == path {
			return err
		}
		return nil
	}
	return func() { stepHook = nil }
}
