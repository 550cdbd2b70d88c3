package redfish

import (
	"context"
	"errors"
	"strings"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

var _ bmc.HealthReader = (*Client)(nil)

// maxHealthMembers bounds the members a health read visits: DIMMs, drives, fans and power
// supplies of one system, a few hundred at most on real servers.
const maxHealthMembers = 512

// status is a Redfish resource's Status.
type status struct {
	State        string
	Health       bmc.HealthState
	HealthRollup bmc.HealthState
}

// counted says whether a part in this state counts: an absent, disabled or standby part (an
// empty slot, a spare) has no health to report.
func (s status) counted() bool {
	switch s.State {
	case "Absent", "Disabled", "StandbyOffline", "StandbySpare", "UnavailableOffline":
		return false
	}
	return true
}

// healthWalk collects a health read's findings.
type healthWalk struct {
	c       *Client
	health  bmc.Health
	visited int
}

// note records a part's status: its health into the roll-up, and the part when not OK.
func (w *healthWalk) note(kind, name, uri string, s status) {
	if !s.counted() {
		return
	}
	w.health.Rollup = bmc.Worse(w.health.Rollup, s.Health)
	if s.Health != "" && s.Health != bmc.HealthOK {
		w.health.Components = append(w.health.Components, bmc.ComponentHealth{Kind: kind, Name: name, URI: uri, Health: s.Health})
	}
}

// members reads each member of a collection (nothing when the link is empty or the collection
// missing) with read.
func (w *healthWalk) members(collection string, read func(uri string) error) error {
	if collection == "" {
		return nil
	}
	links, err := w.c.memberLinks(collection, maxHealthMembers)
	var failed *pageError
	if errors.As(err, &failed) && isNotFound(failed.err) {
		return nil
	}
	if err != nil {
		return classify("reading "+collection, err)
	}
	for _, l := range links {
		if w.visited++; w.visited > maxHealthMembers {
			return nil // bounded: what was read is reported
		}
		if err := read(l); err != nil {
			return err
		}
	}
	return nil
}

// part reads one member's Id, Name and Status and notes it as kind.
func (w *healthWalk) part(kind string) func(uri string) error {
	return func(uri string) error {
		var r struct {
			ID     string `json:"Id"`
			Name   string
			Status status
		}
		if _, err := w.c.getJSON(uri, &r); err != nil {
			if missing(err) {
				return nil
			}
			return classify("reading "+uri, err)
		}
		w.note(kind, cleanName(r.ID, r.Name), uri, r.Status)
		return nil
	}
}

func cleanName(id, name string) string {
	if id = strings.TrimSpace(id); id != "" {
		return id
	}
	return strings.TrimSpace(name)
}

// Health reads the system's health. The System's own Status and roll-up stand for its
// processors, memory and storage, whose members are read only when the roll-up is not OK (a
// server with 24 DIMMs costs one request while healthy). The chassis' thermal and power parts
// are read every time: real BMCs leave them out of the System's roll-up (DMTF's mockup shows a
// power supply in Warning under a System whose roll-up is OK). The new subsystems
// (ThermalSubsystem's Fans, PowerSubsystem's PowerSupplies) are read where the chassis has them,
// else the older Thermal (Fans, Temperatures) and Power (PowerSupplies). A system with no
// Status says nothing: Rollup "".
func (c *Client) Health(ctx context.Context, systemURI string) (bmc.Health, error) {
	if err := ctx.Err(); err != nil {
		return bmc.Health{}, err
	}
	var sys struct {
		ID                     string `json:"Id"`
		Status                 status
		Processors, Memory     *link
		Storage, SimpleStorage *link
		Links                  struct{ Chassis []link }
	}
	if _, err := c.getJSON(systemURI, &sys); err != nil {
		return bmc.Health{}, classify("reading system "+systemURI, err)
	}
	w := &healthWalk{c: c}
	w.health.Rollup = bmc.Worse(sys.Status.Health, sys.Status.HealthRollup)
	if sys.Status.Health != "" && sys.Status.Health != bmc.HealthOK {
		w.health.Components = append(w.health.Components, bmc.ComponentHealth{Kind: "System", Name: sys.ID, URI: systemURI, Health: sys.Status.Health})
	}
	if w.health.Rollup != "" && w.health.Rollup != bmc.HealthOK {
		for _, coll := range []struct {
			kind string
			l    *link
		}{{"Processor", sys.Processors}, {"Memory", sys.Memory}} {
			if coll.l != nil {
				if err := w.members(coll.l.ID, w.part(coll.kind)); err != nil {
					return bmc.Health{}, err
				}
			}
		}
		if sys.Storage != nil {
			if err := w.members(sys.Storage.ID, w.storage); err != nil {
				return bmc.Health{}, err
			}
		}
	}
	for _, ch := range sys.Links.Chassis {
		if err := w.chassis(ch.ID); err != nil {
			return bmc.Health{}, err
		}
	}
	return w.health, nil
}

// storage reads a Storage: its controllers (inline) and its drives.
func (w *healthWalk) storage(uri string) error {
	var st struct {
		ID                 string `json:"Id"`
		Drives             []link
		StorageControllers []struct {
			MemberID string `json:"MemberId"`
			Name     string
			Status   status
		}
	}
	if _, err := w.c.getJSON(uri, &st); err != nil {
		if missing(err) {
			return nil
		}
		return classify("reading "+uri, err)
	}
	for _, sc := range st.StorageControllers {
		w.note("StorageController", cleanName(sc.Name, sc.MemberID), uri, sc.Status)
	}
	for _, d := range st.Drives {
		if w.visited++; w.visited > maxHealthMembers {
			return nil
		}
		if err := w.part("Drive")(d.ID); err != nil {
			return err
		}
	}
	return nil
}

// chassis reads a chassis' fans, temperatures and power supplies.
func (w *healthWalk) chassis(uri string) error {
	var ch struct {
		ID                               string `json:"Id"`
		Status                           status
		Thermal, Power                   *link
		ThermalSubsystem, PowerSubsystem *link
	}
	if _, err := w.c.getJSON(uri, &ch); err != nil {
		if missing(err) {
			return nil
		}
		return classify("reading chassis "+uri, err)
	}
	if ch.Status.Health != "" && ch.Status.Health != bmc.HealthOK {
		w.note("Chassis", ch.ID, uri, status{Health: ch.Status.Health, State: ch.Status.State})
	}
	if ch.ThermalSubsystem != nil {
		var ts struct{ Fans *link }
		if _, err := w.c.getJSON(ch.ThermalSubsystem.ID, &ts); err != nil && !missing(err) {
			return classify("reading "+ch.ThermalSubsystem.ID, err)
		} else if err == nil && ts.Fans != nil {
			if err := w.members(ts.Fans.ID, w.part("Fan")); err != nil {
				return err
			}
		}
	} else if ch.Thermal != nil {
		var th struct{ Fans, Temperatures []inlinePart }
		if _, err := w.c.getJSON(ch.Thermal.ID, &th); err != nil && !missing(err) {
			return classify("reading "+ch.Thermal.ID, err)
		}
		for _, f := range th.Fans {
			w.note("Fan", f.name(), ch.Thermal.ID, f.Status)
		}
		for _, t := range th.Temperatures {
			w.note("Temperature", t.name(), ch.Thermal.ID, t.Status)
		}
	}
	if ch.PowerSubsystem != nil {
		var ps struct{ PowerSupplies *link }
		if _, err := w.c.getJSON(ch.PowerSubsystem.ID, &ps); err != nil && !missing(err) {
			return classify("reading "+ch.PowerSubsystem.ID, err)
		} else if err == nil && ps.PowerSupplies != nil {
			if err := w.members(ps.PowerSupplies.ID, w.part("PowerSupply")); err != nil {
				return err
			}
		}
	} else if ch.Power != nil {
		var pw struct{ PowerSupplies []inlinePart }
		if _, err := w.c.getJSON(ch.Power.ID, &pw); err != nil && !missing(err) {
			return classify("reading "+ch.Power.ID, err)
		}
		for _, p := range pw.PowerSupplies {
			w.note("PowerSupply", p.name(), ch.Power.ID, p.Status)
		}
	}
	return nil
}

// inlinePart is a member of the older Thermal and Power resources' arrays.
type inlinePart struct {
	MemberID string `json:"MemberId"`
	Name     string
	Status   status
}

func (p inlinePart) name() string { return cleanName(p.Name, p.MemberID) }
