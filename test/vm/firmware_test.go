package vm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ciskip"
	"github.com/ironfleet/ironfleet/test/vm"
)

// TestSecureBootEnabledReadsOVMFsStore: Debian's variable store with Microsoft's keys has
// Secure Boot on, its plain one has no such variable: off.
func TestSecureBootEnabledReadsOVMFsStore(t *testing.T) {
	on, err := vm.SecureBootEnabled(vm.SecureBootOVMFVars)
	ciskip.Unless(t, err == nil, "OVMF is not installed (apt-get install --no-install-recommends ovmf): %v", err)
	assert.True(t, on, vm.SecureBootOVMFVars)
	off, err := vm.SecureBootEnabled(vm.DefaultOVMFVars)
	require.NoError(t, err)
	assert.False(t, off, vm.DefaultOVMFVars)
	_, err = vm.SecureBootEnabled("/nonexistent")
	assert.Error(t, err)
}
