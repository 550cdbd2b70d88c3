package bmcsim

// SystemIDs are the Ids of the BMC's systems, in the order Options.Systems gave them (the
// profile names those that had none); nil for a static mockup.
func (b *BMC) SystemIDs() []string {
	m := b.model
	if m == nil {
		return nil
	}
	ids := make([]string, len(m.systems))
	for i, s := range m.systems {
		ids[i] = s.spec.ID
	}
	return ids
}

// Quirks is the quirk set the BMC runs with (its profile's, or Options.Quirks); the zero value
// for a static mockup.
func (b *BMC) Quirks() Quirks {
	if b.model == nil {
		return Quirks{}
	}
	return b.model.q
}
