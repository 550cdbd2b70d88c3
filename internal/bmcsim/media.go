package bmcsim

// BootCd is the boot target of a system's virtual CD/DVD (Redfish's "Cd").
const BootCd BootTarget = "Cd"

// MediaEvent is the state of one system's virtual CD/DVD after a change: an insert (the BMC
// has fetched the image, as real BMCs and sushy-tools do, into Path) or an eject.
type MediaEvent struct {
	SystemID string
	// Image is the URL the client inserted ("" once ejected).
	Image string
	// Path is the local file the BMC fetched Image into ("" once ejected): what a host behind
	// the system (a VM) attaches as its CD.
	Path     string
	Inserted bool
}

// Media is a system's virtual CD/DVD now (the zero MediaEvent, with SystemID, when empty or
// when the system has none).
func (b *BMC) Media(systemID string) MediaEvent {
	return MediaEvent{SystemID: systemID} // stub: implemented for issue #20
}

// OnMediaChange adds a hook called after every insert and eject of a system's virtual media,
// outside the BMC's locks, before the request that caused it is answered.
func (b *BMC) OnMediaChange(hook func(MediaEvent)) {
	// stub: implemented for issue #20
}
