package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ironfleet/ironfleet/metalprobe/earlyboot"
)

func TestModulesSummary(t *testing.T) {
	assert.Equal(t, "loaded 3 of 53 kernel modules (49 for hardware this machine does not have): virtio_ring virtio virtio_net",
		modulesSummary(earlyboot.Loaded{Total: 53, Loaded: []string{"virtio_ring", "virtio", "virtio_net"}, Skipped: make([]string, 49)}))
	assert.Equal(t, "loaded 1 of 2 kernel modules: e1000",
		modulesSummary(earlyboot.Loaded{Total: 2, Loaded: []string{"e1000"}}), "nothing skipped: the PCI devices could not be read")
	assert.Equal(t, "loaded 0 of 0 kernel modules", modulesSummary(earlyboot.Loaded{}))
}
