package bmcsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// secureBootPath is the system's SecureBoot resource, linked from the ComputerSystem unless
// the NoSecureBoot quirk hides it.
func (s *system) secureBootPath() string { return s.path + "/SecureBoot" }

// firmwareMode is the mode the system boots in now: its override mode, with Secure Boot as the
// last power-on applied it. The caller holds m.mu.
func (s *system) firmwareMode() string {
	switch {
	case s.bootMode != BootModeUEFI:
		return BootModeLegacy
	case s.secureBootCurrent:
		return BootModeUEFISecureBoot
	}
	return BootModeUEFI
}

// applySecureBoot is what firmware does at power-on: the Secure Boot setting becomes the
// current boot's, in UEFI mode only (Legacy boots never verify signatures).
func (s *system) applySecureBoot() {
	s.secureBootCurrent = s.secureBootEnable && s.bootMode == BootModeUEFI
}

// secureBoot renders the SecureBoot resource; the caller holds m.mu. SecureBootMode is
// UserMode: the platform key is enrolled (the vendor's keys, as shipped), whether or not
// enforcement is on.
func (m *model) secureBoot(s *system) obj {
	r := m.resource(s.secureBootPath(), "#SecureBoot.v1_1_0.SecureBoot", "SecureBoot", "UEFI Secure Boot")
	r["SecureBootEnable"] = s.secureBootEnable
	r["SecureBootCurrentBoot"] = "Disabled"
	if s.secureBootCurrent {
		r["SecureBootCurrentBoot"] = "Enabled"
	}
	r["SecureBootMode"] = "UserMode"
	return r
}

// patchSecureBoot serves PATCH {"SecureBootEnable": bool}: the setting is stored, and takes
// effect at the next power-on (applySecureBoot), as on real firmware. Every other property is
// read-only.
func (b *BMC) patchSecureBoot(s *system) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := decodeObject(w, r)
		if !ok {
			return
		}
		var enable *bool
		for k, raw := range body {
			switch {
			case strings.HasPrefix(k, "@"):
			case k == "SecureBootEnable":
				var v bool
				if err := json.Unmarshal(raw, &v); err != nil {
					writeError(w, r, http.StatusBadRequest, msgPropertyValue,
						fmt.Sprintf("The value %s for the property SecureBootEnable is not in the list of acceptable values [true false].", raw), string(raw), k)
					return
				}
				enable = &v
			default:
				writeError(w, r, http.StatusBadRequest, msgPropertyNotWritten,
					fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k), k)
				return
			}
		}
		if enable != nil {
			m.mu.Lock()
			s.secureBootEnable = *enable
			m.mu.Unlock()
		}
		writeNoContent(w)
	}
}

// secureBootEndpoint is the SecureBoot resource's GET and PATCH.
func (b *BMC) secureBootEndpoint(s *system) endpoint {
	m := b.model
	return endpoint{get: m.locked(func(time.Time) obj { return m.secureBoot(s) }), patch: b.patchSecureBoot(s)}
}

// BootMode is the firmware mode a system boots in now (BootModeUEFI, BootModeUEFISecureBoot or
// BootModeLegacy): what a host behind it must boot as, whatever the BMC shows (under
// NoSecureBoot it shows no Secure Boot at all). "" for an unknown system or a static mockup.
func (b *BMC) BootMode(systemID string) string {
	m := b.model
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.findSystem(systemID); s != nil {
		return s.firmwareMode()
	}
	return ""
}

// SecureBoot reports a system's Secure Boot setting (SecureBootEnable, pending until the next
// power-on) and whether the current boot runs with it (SecureBootCurrentBoot Enabled).
func (b *BMC) SecureBoot(systemID string) (enable, current bool) {
	m := b.model
	if m == nil {
		return false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.findSystem(systemID); s != nil {
		return s.secureBootEnable, s.secureBootCurrent
	}
	return false, false
}
