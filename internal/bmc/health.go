package bmc

import "context"

// HealthState is a Redfish Status.Health: OK, Warning or Critical.
type HealthState string

const (
	HealthOK       HealthState = "OK"
	HealthWarning  HealthState = "Warning"
	HealthCritical HealthState = "Critical"
)

// Worse is the worse of two health states; "" (not said) is better than any.
func Worse(a, b HealthState) HealthState {
	rank := map[HealthState]int{HealthOK: 1, HealthWarning: 2, HealthCritical: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// ComponentHealth is one part of a system whose health is not OK.
type ComponentHealth struct {
	// Kind is what it is: Processor, Memory, Drive, StorageController, Storage, Fan,
	// Temperature, PowerSupply, System or Chassis.
	Kind string
	// Name is the BMC's name for it (a DIMM's Id, a fan's Name), URI its @odata.id.
	Name, URI string
	Health    HealthState
}

// Health is a system's health as its BMC reports it: the roll-up, the worst of what was
// read, and the parts that are not OK. Rollup "" means the BMC says nothing of it.
type Health struct {
	Rollup     HealthState
	Components []ComponentHealth
}

// HealthReader reads a system's health. IPMI's client does not implement it yet (its
// sensors and SEL are not read).
type HealthReader interface {
	Health(ctx context.Context, systemURI string) (Health, error)
}
