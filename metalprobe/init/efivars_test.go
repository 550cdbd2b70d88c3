package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A host booted the legacy way has no /sys/firmware/efi: /init mounts nothing and says nothing.
func TestMountEFIVarsOnALegacyHostDoesNothing(t *testing.T) {
	assert.NoError(t, mountEFIVars(t.TempDir()))
}
