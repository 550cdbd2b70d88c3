package bmcsim

import (
	"slices"
	"time"
)

// visiblePower is what a GET shows: the actual state, or the previous one while the
// PowerStateLag quirk holds it back.
func (s *system) visiblePower(now time.Time) string {
	if now.Before(s.lagUntil) {
		return s.shownPower
	}
	return s.power
}

// setPower changes the actual state; lag is how long GET keeps showing the old one. A
// transition to On boots the host and returns the event to fire once the lock is released.
func (m *model) setPower(s *system, state string, lag time.Duration, now time.Time) []PowerOnEvent {
	if state == s.power {
		return nil
	}
	shown := s.visiblePower(now)
	s.power = state
	if lag > 0 {
		s.shownPower, s.lagUntil = shown, now.Add(lag)
	} else {
		s.lagUntil = time.Time{}
	}
	if state != "On" {
		return nil
	}
	return []PowerOnEvent{m.boot(s, now)}
}

// boot picks the boot target the way firmware does: a Once override is used and consumed,
// a Continuous one is used every time, otherwise the host boots from disk. Firmware updates
// staged for the host (activateFirmware: a BIOS, a NIC's firmware, once their task has ended),
// then staged BIOS settings (applyBIOSSettings: BootMode among them decides the mode of this
// boot) and the Secure Boot setting (applySecureBoot) take effect here.
func (m *model) boot(s *system, now time.Time) PowerOnEvent {
	m.settleUpdates(now)
	s.activateFirmware(now)
	s.applyBIOSSettings()
	target := BootHdd
	switch s.bootOnce {
	case "Once":
		if s.bootTarget != BootNone && s.bootTarget != "" {
			target = s.bootTarget
		}
		s.bootOnce = "Disabled"
		s.bootGen++
	case "Continuous":
		if s.bootTarget != BootNone && s.bootTarget != "" {
			target = s.bootTarget
		}
	}
	if target == BootCd && m.dellCd() && !s.virtualCd {
		target = BootPhysicalCd
	}
	if s.bootOnce == "Disabled" {
		s.virtualCd = false
	}
	s.applySecureBoot()
	ev := PowerOnEvent{SystemID: s.spec.ID, UUID: s.spec.UUID, Boot: target, BootMode: s.firmwareMode(), BIOSVersion: s.biosVersion, Time: now}
	if target == BootUefiHttp {
		ev.HTTPBootURI = s.httpBootURI
	}
	if len(s.bootLog) >= maxBootLog {
		s.bootLog = slices.Delete(s.bootLog, 0, len(s.bootLog)-maxBootLog+1)
	}
	s.bootLog = append(s.bootLog, ev)
	return ev
}

// reset applies a ComputerSystem.Reset type the profile offers. Restarts and power cycles
// boot the host again even when it was already on, so they record a power-on too. The
// returned change carries the power-on events and the action for the power hooks.
func (m *model) reset(s *system, resetType string, now time.Time) powerChange {
	lag := m.q.PowerStateLag
	from := s.power
	var boots []PowerOnEvent
	switch resetType {
	case "On", "ForceOn":
		boots = m.setPower(s, "On", lag, now)
	case "ForceOff":
		boots = m.setPower(s, "Off", lag, now)
	case "GracefulShutdown":
		// A host that shuts itself down (a VM) decides whether and when it goes off; it
		// reports Off through SetPowerState once it really is, so the state stays honest.
		if !s.hostShutsDown {
			boots = m.setPower(s, "Off", lag, now)
		}
	case "PushPowerButton":
		switch {
		case s.power != "On":
			boots = m.setPower(s, "On", lag, now)
		case !s.hostShutsDown: // a short press asks the OS to shut down, like GracefulShutdown
			boots = m.setPower(s, "Off", lag, now)
		}
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		if s.power == "On" {
			boots = []PowerOnEvent{m.boot(s, now)}
		} else {
			boots = m.setPower(s, "On", lag, now)
		}
	}
	// Nmi: the host gets an interrupt, its power does not change.
	action := PowerAction{SystemID: s.spec.ID, UUID: s.spec.UUID, ResetType: resetType, From: from, To: s.power, Time: now}
	if len(boots) > 0 {
		action.Boot, action.HTTPBootURI, action.BIOSVersion = boots[0].Boot, boots[0].HTTPBootURI, s.biosVersion
	}
	return powerChange{boots: boots, actions: []PowerAction{action}}
}

// powerChange is what one reset or SetPowerState produced, for the hooks to see once the
// BMC's lock is released.
type powerChange struct {
	boots   []PowerOnEvent
	actions []PowerAction
}

// fireChange calls the power-on hooks, then the power-action hooks, outside every lock.
func (m *model) fireChange(c powerChange) {
	m.fire(c.boots)
	if len(c.actions) == 0 {
		return
	}
	m.mu.Lock()
	hooks := slices.Clone(m.actionHooks)
	m.mu.Unlock()
	for _, a := range c.actions {
		for _, h := range hooks {
			h(a)
		}
	}
}

// fire calls the power-on hooks outside every lock, so a hook may call back into the BMC.
func (m *model) fire(events []PowerOnEvent) {
	if len(events) == 0 {
		return
	}
	m.mu.Lock()
	hooks := slices.Clone(m.hooks)
	m.mu.Unlock()
	for _, ev := range events {
		for _, h := range hooks {
			h(ev)
		}
	}
}

// PowerState is the actual power state of a system ("On"/"Off"), ignoring PowerStateLag;
// "" for an unknown system or a static mockup.
func (b *BMC) PowerState(systemID string) string {
	m := b.model
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.findSystem(systemID); s != nil {
		return s.power
	}
	return ""
}

// SetPowerState changes a system's power as the environment would (a host shutting itself
// down, a lab powering it): immediately visible, and a transition to On boots the host and
// fires the power-on hooks. Every transition fires the power-action hooks with an empty
// ResetType. Unknown systems and states other than "On"/"Off" are ignored.
func (b *BMC) SetPowerState(systemID, state string) {
	m := b.model
	if m == nil || (state != "On" && state != "Off") {
		return
	}
	m.mu.Lock()
	var change powerChange
	if s := m.findSystem(systemID); s != nil && s.power != state {
		now, from := time.Now(), s.power
		change.boots = m.setPower(s, state, 0, now)
		action := PowerAction{SystemID: s.spec.ID, UUID: s.spec.UUID, From: from, To: state, Time: now}
		if len(change.boots) > 0 {
			action.Boot, action.HTTPBootURI, action.BIOSVersion = change.boots[0].Boot, change.boots[0].HTTPBootURI, s.biosVersion
		}
		change.actions = []PowerAction{action}
	}
	m.mu.Unlock()
	m.fireChange(change)
}

// BootOverride reports a system's boot source override as a client would set it.
func (b *BMC) BootOverride(systemID string) (target BootTarget, enabled string) {
	m := b.model
	if m == nil {
		return "", ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.findSystem(systemID); s != nil {
		return s.bootTarget, s.bootOnce
	}
	return "", ""
}

// BootLog returns a copy of a system's power-on events, oldest first (the last 1024).
func (b *BMC) BootLog(systemID string) []PowerOnEvent {
	m := b.model
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.findSystem(systemID); s != nil {
		return slices.Clone(s.bootLog)
	}
	return nil
}

// OnPowerOn adds a hook called for every power-on with the boot target used. It runs on the
// goroutine that caused the power-on (the reset request, or SetPowerState) before that
// returns, outside the BMC's locks; hand long work off to another goroutine.
func (b *BMC) OnPowerOn(hook func(PowerOnEvent)) {
	m := b.model
	if m == nil || hook == nil {
		return
	}
	m.mu.Lock()
	m.hooks = append(m.hooks, hook)
	m.mu.Unlock()
}

// OnPowerAction adds a hook called for every accepted ComputerSystem.Reset (whether or not
// it changed the power) and every transition SetPowerState makes, so a real host behind the
// system (a VM) can start, stop or reset. Like OnPowerOn it runs on the goroutine that caused
// the action, outside the BMC's locks, after the power-on hooks; hand long work off.
func (b *BMC) OnPowerAction(hook func(PowerAction)) {
	m := b.model
	if m == nil || hook == nil {
		return
	}
	m.mu.Lock()
	m.actionHooks = append(m.actionHooks, hook)
	m.mu.Unlock()
}

// SetHostShutsDown says whether a system's host carries out graceful shutdowns itself. When
// true, GracefulShutdown (and PushPowerButton on a running system) leave the power On and
// only reach the host through the power-action hooks; the host reports Off with
// SetPowerState once it has stopped, and a host that ignores the request stays On, as a
// real server without an OS does. It reports whether the system exists.
func (b *BMC) SetHostShutsDown(systemID string, hostShutsDown bool) bool {
	m := b.model
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.findSystem(systemID)
	if s != nil {
		s.hostShutsDown = hostShutsDown
	}
	return s != nil
}

// SetIgnoresResets makes the BMC accept every Reset and do nothing (the IgnoresResets quirk),
// or act on them again: a BMC whose firmware hangs, then recovers.
func (b *BMC) SetIgnoresResets(ignore bool) {
	m := b.model
	if m == nil {
		return
	}
	m.mu.Lock()
	m.ignoreResets = ignore
	m.mu.Unlock()
}
