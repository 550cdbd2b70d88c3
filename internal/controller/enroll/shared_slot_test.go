package enroll

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSharedSlot: two systems behind one virtual CD are found, whatever the map's order; systems
// with slots of their own are not.
func TestSharedSlot(t *testing.T) {
	a, b, slot := sharedSlot(map[string]string{
		"/redfish/v1/Systems/2": "/redfish/v1/Managers/1/VirtualMedia/CD",
		"/redfish/v1/Systems/1": "/redfish/v1/Managers/1/VirtualMedia/CD",
		"/redfish/v1/Systems/3": "/redfish/v1/Systems/3/VirtualMedia/CD",
	})
	assert.Equal(t, []string{"/redfish/v1/Systems/1", "/redfish/v1/Systems/2", "/redfish/v1/Managers/1/VirtualMedia/CD"}, []string{a, b, slot})

	_, _, slot = sharedSlot(map[string]string{
		"/redfish/v1/Systems/1": "/redfish/v1/Systems/1/VirtualMedia/CD",
		"/redfish/v1/Systems/2": "/redfish/v1/Systems/2/VirtualMedia/CD",
	})
	assert.Empty(t, slot, "each system has its own CD")
	_, _, slot = sharedSlot(map[string]string{"/redfish/v1/Systems/1": "/redfish/v1/Managers/1/VirtualMedia/CD"})
	assert.Empty(t, slot, "one system alone shares nothing")
}
