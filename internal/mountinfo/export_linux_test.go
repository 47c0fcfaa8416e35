package mountinfo

// ByTable is Of told by the table of mounts alone, as a kernel without
// statmount(2) tells it.
func ByTable(path string) (Place, error) {
	byTableOnly = true
	defer func() { byTableOnly = false }()
	return Of(path)
}

// UseStatmount has places told by statmount(2) again, after a test that
// made it be found refused.
func UseStatmount() { noStatmount.Store(false) }
