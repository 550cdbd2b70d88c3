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

// SetBIOSVersion makes a system run another BIOS version, as a firmware update would: the
// System's BiosVersion and its FirmwareInventory member show it. Unknown systems are ignored.
func (b *BMC) SetBIOSVersion(systemID, version string) {
	m := b.model
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.findSystem(systemID); s != nil {
		s.biosVersion = version
	}
}
