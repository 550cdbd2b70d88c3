package bmcsim

import (
	"fmt"
	"strings"
	"sync"
)

// Health: every resource the simulator serves is OK, unless a test or the lab says otherwise
// (SetHealth): a failing DIMM, drive, processor or storage controller of a system. The part
// shows the health in its Status, and the System's Status.HealthRollup (and the Storage's) the
// worst under it, as BMCs roll health up.

// healthState holds the parts' health set by SetHealth, by resource path (lower case).
type healthState struct {
	mu    sync.Mutex
	parts map[string]string
}

// SetHealth sets the health (OK, Warning or Critical) of a part of system systemID, named by
// its path below the System: "Memory/<id>", "Processors/<id>", "Storage/1/Drives/<id>",
// "Storage/1/StorageControllers/0", or "" for the System itself. OK clears it.
func (b *BMC) SetHealth(systemID, part, health string) error {
	m := b.model
	s := m.findSystem(systemID)
	if s == nil {
		return fmt.Errorf("no system %q", systemID)
	}
	switch health {
	case "OK", "Warning", "Critical":
	default:
		return fmt.Errorf("health %q is not OK, Warning or Critical", health)
	}
	path := strings.ToLower(strings.TrimSuffix(s.path+"/"+part, "/"))
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	if m.health.parts == nil {
		m.health.parts = map[string]string{}
	}
	if health == "OK" {
		delete(m.health.parts, path)
	} else {
		m.health.parts[path] = health
	}
	return nil
}

// status is the Status of the part at path.
func (m *model) status(path string) obj {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	if h, ok := m.health.parts[strings.ToLower(path)]; ok {
		return obj{"State": "Enabled", "Health": h}
	}
	return statusOK
}

// rolledUp is the Status of the resource at path with HealthRollup, the worst of its own health
// and of every part below it.
func (m *model) rolledUp(path string) obj {
	st := m.status(path)
	own, _ := st["Health"].(string)
	worst := own
	prefix := strings.ToLower(path) + "/"
	m.health.mu.Lock()
	for p, h := range m.health.parts {
		if strings.HasPrefix(p, prefix) && healthRank[h] > healthRank[worst] {
			worst = h
		}
	}
	m.health.mu.Unlock()
	return obj{"State": "Enabled", "Health": own, "HealthRollup": worst}
}

var healthRank = map[string]int{"OK": 1, "Warning": 2, "Critical": 3}
