package bmcsim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

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

// Defaults of the media options.
const (
	// DefaultMediaMaxBytes caps an image InsertMedia fetches (Options.MediaMaxBytes).
	DefaultMediaMaxBytes int64 = 2 << 30
	// DefaultMediaFetchTimeout bounds one image fetch (Options.MediaFetchTimeout).
	DefaultMediaFetchTimeout = 2 * time.Minute
)

// slotDef is one VirtualMedia slot of a profile's layout.
type slotDef struct {
	id         string
	mediaTypes []string
	// cd marks the slot the system boots ISOs from: the one Media and OnMediaChange report
	// and a host attaches as its CD-ROM. Other slots take media too, which no host sees.
	cd bool
	// kvmOnly is a slot only a KVM console session can fill (OpenBMC's proxy mode): no
	// actions and no PATCH.
	kvmOnly bool
}

// mediaLayout is where a profile's BMC keeps VirtualMedia: under each System (DMTF's
// current model, iDRAC ≥ 6, sushy-tools) or under the Manager (iLO, XCC, Supermicro,
// OpenBMC). A Manager's slots belong to the BMC's first system; further systems of such a
// BMC get the same slots under their own System, as blade enclosures do.
type mediaLayout struct {
	underManager bool
	slots        []slotDef
}

var (
	cdDVD = []string{"CD", "DVD"}
	usb   = []string{"USBStick"}
)

// mediaLayouts are the profiles' VirtualMedia shapes (docs/bmc-virtual-media.md).
var mediaLayouts = map[Profile]mediaLayout{
	ProfileGeneric:    {slots: []slotDef{{id: "CD", mediaTypes: cdDVD, cd: true}}},
	ProfileDell:       {slots: []slotDef{{id: "1", mediaTypes: cdDVD, cd: true}, {id: "2", mediaTypes: usb}}},
	ProfileHPE:        {underManager: true, slots: []slotDef{{id: "1", mediaTypes: []string{"Floppy", "USBStick"}}, {id: "2", mediaTypes: cdDVD, cd: true}}},
	ProfileLenovo:     {underManager: true, slots: []slotDef{{id: "EXT1", mediaTypes: []string{"CD", "DVD", "USBStick"}, cd: true}, {id: "EXT2", mediaTypes: usb}}},
	ProfileSupermicro: {underManager: true, slots: []slotDef{{id: "CD1", mediaTypes: cdDVD, cd: true}, {id: "USB1", mediaTypes: usb}}},
	ProfileOpenBMC:    {underManager: true, slots: []slotDef{{id: "Slot_0", mediaTypes: []string{"CD", "USBStick"}, kvmOnly: true}, {id: "Slot_1", mediaTypes: []string{"CD", "USBStick"}, cd: true}}},
}

// mediaSlot is one VirtualMedia resource and what is inserted in it. Mutable fields are
// guarded by model.mu.
type mediaSlot struct {
	def   slotDef
	owner *system
	path  string // canonical @odata.id

	image, file string // the inserted URL and the local file it was fetched into
	inserted    bool
	protocol    string // TransferProtocolType the client sent, if any
	gen         uint64 // bumped on every change: the slot's ETag
	busy        bool   // an insert is fetching; other changes wait for it (409)

	// VirtualMediaInsertedLag: until lagUntil, GET shows shownImage/shownInserted.
	lagUntil      time.Time
	shownImage    string
	shownInserted bool
}

func (sl *mediaSlot) etag() string { return fmt.Sprintf(`W/"vm%d"`, sl.gen) }

// visible is what a GET shows: the state, or the lagging one under VirtualMediaInsertedLag.
func (sl *mediaSlot) visible(now time.Time) (image string, inserted bool) {
	if now.Before(sl.lagUntil) {
		return sl.shownImage, sl.shownInserted
	}
	return sl.image, sl.inserted
}

// newMediaSlots lays out a system's slots; systems[0] of a Manager-media profile gets the
// Manager's slots.
func (m *model) newMediaSlots(s *system, first bool) {
	if m.q.NoVirtualMedia {
		return
	}
	layout := m.prof.media
	base := s.path + "/VirtualMedia/"
	if layout.underManager && first {
		base = m.managerPath() + "/VirtualMedia/"
		s.mediaUnderManager = true
	}
	for _, d := range layout.slots {
		s.media = append(s.media, &mediaSlot{def: d, owner: s, path: base + d.id})
	}
}

// cdSlot is the system's boot CD/DVD slot, or nil.
func (s *system) cdSlot() *mediaSlot {
	for _, sl := range s.media {
		if sl.def.cd {
			return sl
		}
	}
	return nil
}

// systemMedia is the slots listed under the System (none when they are the Manager's).
func (s *system) systemMedia() []*mediaSlot {
	if s.mediaUnderManager {
		return nil
	}
	return s.media
}

// managerMedia is the slots listed under the Manager.
func (m *model) managerMedia() []*mediaSlot {
	if len(m.systems) == 0 || !m.systems[0].mediaUnderManager {
		return nil
	}
	return m.systems[0].media
}

func findSlot(slots []*mediaSlot, id string) *mediaSlot {
	for _, sl := range slots {
		if strings.EqualFold(sl.def.id, id) {
			return sl
		}
	}
	return nil
}

// mediaEvent is the event a change of sl makes, and whether it is one to tell (the system's
// CD slot). The caller holds m.mu.
func (m *model) mediaEvent(sl *mediaSlot) (MediaEvent, bool) {
	return MediaEvent{SystemID: sl.owner.spec.ID, Image: sl.image, Path: sl.file, Inserted: sl.inserted}, sl.def.cd
}

// fireMedia calls the media hooks outside every lock.
func (m *model) fireMedia(ev MediaEvent) {
	m.mu.Lock()
	hooks := slices.Clone(m.mediaHooks)
	m.mu.Unlock()
	for _, h := range hooks {
		h(ev)
	}
}

// Media is a system's virtual CD/DVD now (the zero MediaEvent, with SystemID, when empty or
// when the system has none). It is the actual state, whatever VirtualMediaInsertedLag shows.
func (b *BMC) Media(systemID string) MediaEvent {
	m := b.model
	if m == nil {
		return MediaEvent{SystemID: systemID}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.findSystem(systemID)
	if s == nil {
		return MediaEvent{SystemID: systemID}
	}
	sl := s.cdSlot()
	if sl == nil {
		return MediaEvent{SystemID: s.spec.ID}
	}
	ev, _ := m.mediaEvent(sl)
	return ev
}

// OnMediaChange adds a hook called after every insert and eject of a system's virtual media,
// outside the BMC's locks, before the request that caused it is answered.
func (b *BMC) OnMediaChange(hook func(MediaEvent)) {
	m := b.model
	if m == nil || hook == nil {
		return
	}
	m.mu.Lock()
	m.mediaHooks = append(m.mediaHooks, hook)
	m.mu.Unlock()
}
