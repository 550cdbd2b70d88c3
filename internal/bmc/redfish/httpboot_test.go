package redfish_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestHTTPBootByURI: a system that offers the UefiHttp override and HttpBootUri is booted once
// from the URI: the next power-on boots UefiHttp with it, in UEFI mode, and the one after from
// the disk. One without them (the NoHTTPBootURI quirk, the Dell profile) says so, naming what it
// lacks, as ErrUnsupported; neither answer carries the URI's token.
func TestHTTPBootByURI(t *testing.T) {
	const url = "http://10.213.2.1:8080/boot/s3cr3t-t0ken/probe.iso"
	ctx := context.Background()
	spec := testSystem(0)
	spec.BootMode = bmcsim.BootModeLegacy
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{spec}})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	uri := systems[0].URI

	require.NoError(t, c.HTTPBootSupported(ctx, uri))
	require.NoError(t, c.SetHTTPBootOnce(ctx, uri, url))
	require.NoError(t, c.SetPower(ctx, uri, bmc.PowerOn))
	log := sim.BootLog(systems[0].ID)
	require.NotEmpty(t, log)
	last := log[len(log)-1]
	assert.Equal(t, bmcsim.BootUefiHttp, last.Boot)
	assert.Equal(t, url, last.HTTPBootURI, "the firmware is given the URI")
	assert.Equal(t, bmcsim.BootModeUEFI, last.BootMode, "UEFI HTTP boot is UEFI's: the override mode is set")
	require.NoError(t, c.SetPower(ctx, uri, bmc.PowerForceRestart))
	log = sim.BootLog(systems[0].ID)
	assert.Equal(t, bmcsim.BootHdd, log[len(log)-1].Boot, "once")
	assert.Empty(t, log[len(log)-1].HTTPBootURI)

	for name, opts := range map[string]bmcsim.Options{
		"the quirk":    {Quirks: &bmcsim.Quirks{NoHTTPBootURI: true}, Systems: []bmcsim.SystemSpec{testSystem(0)}},
		"Dell profile": {Profile: bmcsim.ProfileDell, Systems: []bmcsim.SystemSpec{testSystem(0)}},
	} {
		t.Run(name, func(t *testing.T) {
			sim := startSim(t, opts)
			c := connect(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			uri := systems[0].URI
			err = c.HTTPBootSupported(ctx, uri)
			require.ErrorIs(t, err, bmc.ErrUnsupported)
			assert.Contains(t, err.Error(), "UefiHttp")
			err = c.SetHTTPBootOnce(ctx, uri, url)
			require.ErrorIs(t, err, bmc.ErrUnsupported)
			assert.NotContains(t, err.Error(), "s3cr3t")
			for _, ev := range sim.BootLog(systems[0].ID) {
				assert.NotEqual(t, bmcsim.BootUefiHttp, ev.Boot)
			}
		})
	}
}

// TestHTTPBootURIRefusedIsUnsupported: a BMC that shows UefiHttp and HttpBootUri but refuses
// the PATCH (400) is as good as one without them: ErrUnsupported, its answer scrubbed of the
// URI.
func TestHTTPBootURIRefusedIsUnsupported(t *testing.T) {
	const url = "http://10.213.2.1:8080/boot/s3cr3t-t0ken/probe.iso"
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	// Not an absolute http(s) URL: the simulator refuses the value with 400.
	err = c.SetHTTPBootOnce(ctx, systems[0].URI, "tftp://10.213.2.1/s3cr3t-t0ken")
	require.Error(t, err)
	assert.True(t, errors.Is(err, bmc.ErrUnsupported), "%v", err)
	assert.NotContains(t, err.Error(), "s3cr3t")
	require.NoError(t, c.SetHTTPBootOnce(ctx, systems[0].URI, url), "a URL it takes")
}
