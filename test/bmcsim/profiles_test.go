package bmcsim_test

import (
	"strings"
	"testing"

	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func TestEveryProfileIsWalkableAndControllable(t *testing.T) {
	want := map[bmcsim.Profile]struct {
		systemIDs               []string
		managerID, mgrModel, fw string
	}{
		bmcsim.ProfileGeneric:    {[]string{"1", "2"}, "BMC", "bmcsim", "1.0.0"},
		bmcsim.ProfileDell:       {[]string{"System.Embedded.1", "System.Embedded.2"}, "iDRAC.Embedded.1", "16G Monolithic", "7.10.30.00"},
		bmcsim.ProfileHPE:        {[]string{"1", "2"}, "1", "iLO 5", "iLO 5 v2.72"},
		bmcsim.ProfileLenovo:     {[]string{"1", "2"}, "1", "Lenovo XClarity Controller 2", "ESX322V 3.10"},
		bmcsim.ProfileSupermicro: {[]string{"1", "2"}, "1", "ASPEED", "01.03.18"},
		bmcsim.ProfileOpenBMC:    {[]string{"system", "system2"}, "bmc", "OpenBmc", "2.15.0-dev-1234-g5a1b2c3"},
	}
	require.Len(t, want, len(bmcsim.Profiles()))
	for _, profile := range bmcsim.Profiles() {
		t.Run(string(profile), func(t *testing.T) {
			t.Parallel()
			w := want[profile]
			b := start(t, bmcsim.Options{TLS: true, Profile: profile, Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(1), bmcsim.DefaultSystem(3)}})
			c := connect(t, b, false)
			tr := walk(t, c)

			assert.Equal(t, w.managerID, tr.Manager.ID)
			assert.Equal(t, w.mgrModel, tr.Manager.Model)
			assert.Equal(t, w.fw, tr.Manager.FirmwareVersion)
			require.Len(t, tr.Systems, 2)
			for i, id := range w.systemIDs {
				v := tr.system(t, id)
				assert.Len(t, v.Drives, 4)
				assert.Equal(t, 2, v.System.ProcessorSummary.Count)
				assert.GreaterOrEqual(t, len(v.Memory), 16)
				assert.Len(t, v.NICs, len(bmcsim.DefaultSystem([]int{1, 3}[i]).NICs))
			}

			// Power the first system on with a reset type this BMC offers, then off again,
			// and wait for the BMC to report it as a client must (some profiles lag).
			id := w.systemIDs[0]
			sys := tr.system(t, id).System
			require.NoError(t, sys.Reset(redfish.OnResetType))
			assert.Equal(t, "On", b.PowerState(id))
			eventually(t, func() bool {
				s, err := redfish.GetComputerSystem(c, sys.ODataID)
				return err == nil && s.PowerState == redfish.OnPowerState
			}, "the system reports On")
			require.NoError(t, sys.Reset(redfish.ForceOffResetType))
			assert.Equal(t, "Off", b.PowerState(id))
		})
	}
}

func TestProfileIdentityCanBeOverridden(t *testing.T) {
	b := start(t, bmcsim.Options{Profile: "HPE", Manufacturer: "Acme", Model: "BMC-9", FirmwareVersion: "0.1",
		Quirks: &bmcsim.Quirks{}})
	mgr := getOK(t, b, "/redfish/v1/Managers/1")
	assert.Equal(t, "Acme", mgr["Manufacturer"])
	assert.Equal(t, "BMC-9", mgr["Model"])
	assert.Equal(t, "0.1", mgr["FirmwareVersion"])
	// Quirks replaced the profile's set: no trailing slashes, but the HPE Id style stays.
	assert.Equal(t, []string{"/redfish/v1/Systems/1"}, memberIDs(t, getOK(t, b, "/redfish/v1/Systems")))
}

func TestLenovoManagerUUIDDiffersInCaseOnly(t *testing.T) {
	b := start(t, bmcsim.Options{Profile: bmcsim.ProfileLenovo})
	mgr := getOK(t, b, "/redfish/v1/Managers/1")["UUID"].(string)
	assert.Equal(t, strings.ToUpper(mgr), mgr)
	sys := getOK(t, b, "/redfish/v1/Systems/1")["UUID"].(string)
	assert.Equal(t, strings.ToLower(sys), sys)
}

func TestStartRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]bmcsim.Options{
		"unknown profile": {Profile: "cray"},
		"duplicate Ids":   {Systems: []bmcsim.SystemSpec{{ID: "A"}, {ID: "a"}}},
		"bad power state": {Systems: []bmcsim.SystemSpec{{PowerState: "Sleeping"}}},
		"Id with a slash": {Systems: []bmcsim.SystemSpec{{ID: "a/b"}}},
		"duplicate DIMM":  {Systems: []bmcsim.SystemSpec{{Memory: []bmcsim.DIMM{{ID: "D"}, {ID: "D"}}}}},
		"bad processor":   {Systems: []bmcsim.SystemSpec{{Processors: []bmcsim.Processor{{ProcessorType: "FPGA"}}}}},
		"negative lag":    {Quirks: &bmcsim.Quirks{PowerStateLag: -1}},
		"address in use":  {Addr: "256.0.0.1:0"},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := bmcsim.Start(opts)
			if b != nil {
				_ = b.Close()
			}
			assert.Error(t, err)
		})
	}
}

func TestDefaultSystemsAreDistinctAndVaried(t *testing.T) {
	seen := map[string]bool{}
	shapes := map[int]bool{}
	for i := range 64 {
		s := bmcsim.DefaultSystem(i)
		assert.Equal(t, s, bmcsim.DefaultSystem(i), "deterministic")
		for _, v := range append([]string{s.UUID, s.SerialNumber}, macs(s)...) {
			assert.False(t, seen[v], "%q repeats", v)
			seen[v] = true
		}
		shapes[len(s.Processors)*100+len(s.Drives)*10+len(s.NICs)] = true
		assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, s.UUID)
	}
	assert.GreaterOrEqual(t, len(shapes), 3, "small, dual-socket and GPU boxes")
}

func macs(s bmcsim.SystemSpec) []string {
	var out []string
	for _, n := range s.NICs {
		out = append(out, n.MACAddress)
	}
	return out
}
