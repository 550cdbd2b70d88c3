package ipmi

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

// TestTheClientUpdatesNoFirmware: IPMI has no firmware update nor BIOS settings, so its client
// must not offer bmc.FirmwareUpdater (a caller tells a BMC that can by the interface).
func TestTheClientUpdatesNoFirmware(t *testing.T) {
	_, ok := any((*Client)(nil)).(bmc.FirmwareUpdater)
	assert.False(t, ok)
}
