package bmcsim

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// updateTarget is one piece of firmware an update changes: the BMC's own (sys nil), or a
// system's BIOS or NIC.
type updateTarget struct {
	kind string // componentBMC, componentBIOS or componentNIC
	sys  *system
}

func (t updateTarget) String() string {
	if t.sys == nil {
		return t.kind
	}
	return t.kind + " of system " + t.sys.spec.ID
}

// stagedFirmware is an image waiting on a system for its next reset, and the task that staged it.
type stagedFirmware struct {
	version string
	task    *updateTask
}

// componentTargets is what an image's component names: the class BMC, BIOS (every system's
// that has one) or NIC (every system's first NIC), or one FirmwareInventory member by Id. The
// caller holds m.mu.
func (m *model) componentTargets(component string) []updateTarget {
	var out []updateTarget
	switch strings.ToUpper(component) {
	case componentBMC:
		return []updateTarget{{kind: componentBMC}}
	case componentBIOS, componentNIC:
		kind := strings.ToUpper(component)
		for _, f := range m.firmwareMembers() {
			if f.kind == kind {
				out = append(out, updateTarget{kind: kind, sys: f.sys})
			}
		}
		return out
	}
	if f, ok := m.firmwareMember(component); ok {
		return []updateTarget{{kind: f.kind, sys: f.sys}}
	}
	return nil
}

// resolveTargets reads SimpleUpdate's (or UpdateParameters') Targets: each the @odata.id of a
// FirmwareInventory member, of a System (its BIOS and NIC) or of the Manager (its firmware),
// in any case and with or without a trailing slash or scheme and host. It returns the one
// that names nothing. The caller holds m.mu.
func (m *model) resolveTargets(targets []string) ([]updateTarget, string) {
	var out []updateTarget
	add := func(t updateTarget) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	members := m.firmwareMembers()
	for _, target := range targets {
		p := target
		if u, err := url.Parse(target); err == nil && u.Path != "" {
			p = u.Path
		}
		segs := splitPath(p)
		found := false
		if slices.Equal(segs, splitPath(m.managerPath())) {
			add(updateTarget{kind: componentBMC})
			found = true
		}
		for _, f := range members {
			if slices.Equal(segs, splitPath(firmwareInventoryPath+"/"+f.id)) {
				add(updateTarget{kind: f.kind, sys: f.sys})
				found = true
			}
		}
		for _, s := range m.systems {
			if slices.Equal(segs, splitPath(s.path)) {
				for _, f := range members {
					if f.sys == s {
						add(updateTarget{kind: f.kind, sys: s})
					}
				}
				found = true
			}
		}
		if !found {
			return nil, target
		}
	}
	return out, ""
}

// newUpdateTask decides an update's outcome and records its task; the caller holds m.mu. A
// failure (the image's, or FailNextUpdate's, which wins) shows at a quarter of the duration for
// an image that could not be had, at three quarters for anything else.
func (m *model) newUpdateTask(req updateRequest, now time.Time) *updateTask {
	d := m.updateDuration
	t := &updateTask{start: now, due: now.Add(d), component: req.image.component, version: req.image.version}
	if m.prof.dellJobs {
		m.jobs++
		t.num, t.id = m.jobs, fmt.Sprintf("JID_%012d", m.jobs)
	} else {
		m.taskSeq++
		t.num, t.id = m.taskSeq, fmt.Sprint(m.taskSeq)
	}
	t.name = "Firmware Update: " + or(t.component, "unknown component")
	failAt := func(fraction float64) time.Time { return now.Add(time.Duration(float64(d) * fraction)) }
	switch {
	case req.imageErr != "":
		t.failure, t.failureID, t.failAt = req.imageErr, req.imageErrID, failAt(0.25)
	default:
		t.targets = m.componentTargets(req.image.component)
		if len(t.targets) == 0 {
			t.failure = fmt.Sprintf("The image is for the component %s, which is not in this BMC's firmware inventory.", req.image.component)
		} else if req.named != nil {
			var both []updateTarget
			for _, tg := range t.targets {
				if slices.Contains(req.targets, tg) {
					both = append(both, tg)
				}
			}
			if len(both) == 0 {
				t.failure = fmt.Sprintf("The image is for the component %s, which is not among the Targets %s.", req.image.component, strings.Join(req.named, ", "))
			}
			t.targets = both
		}
		t.failureID, t.failAt = msgApplyFailed, failAt(0.25)
	}
	if m.failNext != nil {
		t.failure, t.failureID, t.failAt = *m.failNext, msgApplyFailed, failAt(0.75)
		m.failNext = nil
	}
	if t.failure != "" {
		t.targets = nil
	} else {
		m.unsettled.Add(1)
	}
	m.updates = append(m.updates, t)
	return t
}

// settleUpdates makes the updates whose task has ended take effect: a BMC's firmware at once
// (the BMC resets itself; the version it ran becomes its previous one), a host's BIOS or NIC
// firmware is staged for the system's next power-on or reset (activateFirmware), replacing what
// was staged there before. The caller holds m.mu.
func (m *model) settleUpdates(now time.Time) {
	if m.unsettled.Load() == 0 {
		return
	}
	for _, t := range m.updates {
		if t.settled || t.failure != "" || now.Before(t.due) {
			continue
		}
		t.settled = true
		m.unsettled.Add(-1)
		for _, tg := range t.targets {
			if tg.sys == nil {
				if m.bmcFirmware != t.version {
					m.bmcPreviousFirmware, m.bmcFirmware = m.bmcFirmware, t.version
				}
				continue
			}
			s := tg.sys
			if old, ok := s.staged[tg.kind]; ok && old.task != t {
				old.task.superseded(now)
			}
			if s.staged == nil {
				s.staged = map[string]stagedFirmware{}
			}
			s.staged[tg.kind] = stagedFirmware{version: t.version, task: t}
			t.awaiting++
		}
	}
}

// settle is settleUpdates for a caller that does not hold m.mu; cheap when nothing is due.
func (m *model) settle() {
	if m.unsettled.Load() == 0 {
		return
	}
	m.mu.Lock()
	m.settleUpdates(time.Now())
	m.mu.Unlock()
}

// activateFirmware is what a host does at power-on with firmware staged for it: it runs it
// from then on. The caller holds m.mu.
func (s *system) activateFirmware(now time.Time) {
	for kind, st := range s.staged {
		switch kind {
		case componentBIOS:
			s.biosVersion = st.version
		case componentNIC:
			s.nicFirmware = st.version
		}
		st.task.activated(now)
	}
	s.staged = nil
}

// FailNextUpdate makes the next firmware update (SimpleUpdate or multipart push) end in
// Exception with message as its task's last message, whatever its image; it changes nothing.
// An empty message is a generic one. Calling it again before an update replaces the message.
func (b *BMC) FailNextUpdate(message string) {
	m := b.model
	if m == nil {
		return
	}
	message = or(message, "The firmware update failed (injected by FailNextUpdate).")
	m.mu.Lock()
	m.failNext = &message
	m.mu.Unlock()
}

// BIOSVersion is the BIOS version a system runs now (a staged update not counted until the
// host resets); "" for an unknown system or a static mockup.
func (b *BMC) BIOSVersion(systemID string) string {
	m := b.model
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleUpdates(time.Now())
	if s := m.findSystem(systemID); s != nil {
		return s.biosVersion
	}
	return ""
}

// FirmwareVersion is the firmware the BMC runs now (its Manager's FirmwareVersion): the
// options' or profile's, or the one an update installed; "" for a static mockup.
func (b *BMC) FirmwareVersion() string {
	m := b.model
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleUpdates(time.Now())
	return m.bmcFirmware
}
