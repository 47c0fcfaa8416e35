package placeholder

// Forget lets the presence's lock go as a killed process's would, its
// record and its set left where they are.
func (p *Presence) Forget() {
	p.f.Close()
	p.f = nil
}
