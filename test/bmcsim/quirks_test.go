package bmcsim_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// quirkCase shows one quirk on the wire and what gofish makes of it.
type quirkCase struct {
	quirks  bmcsim.Quirks
	opts    bmcsim.Options // Quirks is set from quirks
	wire    func(t *testing.T, b *bmcsim.BMC)
	gofish  func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient)
	session bool // log gofish in with a session instead of Basic auth
}

func systems(specs ...bmcsim.SystemSpec) bmcsim.Options { return bmcsim.Options{Systems: specs} }

// odataIDs collects every @odata.id in a JSON document.
func odataIDs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "@odata.id" {
				out = append(out, s)
			}
			out = append(out, odataIDs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, odataIDs(e)...)
		}
	}
	return out
}

var quirkCases = map[string]quirkCase{
	"NoSystemUUID": {
		quirks: bmcsim.Quirks{NoSystemUUID: true}, opts: systems(bmcsim.DefaultSystem(1)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "UUID")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			assert.Empty(t, s.UUID)
			assert.Equal(t, bmcsim.DefaultSystem(1).SerialNumber, s.SerialNumber, "the rest of the identity is there")
		},
	},
	"NoSecureBoot": {
		quirks: bmcsim.Quirks{NoSecureBoot: true}, opts: systems(bmcsim.DefaultSystem(1)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "SecureBoot")
			status, _, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems/1/SecureBoot", nil)
			assert.Equal(t, http.StatusNotFound, status)
			assert.Equal(t, "UEFI", getOK(t, b, "/redfish/v1/Systems/1")["Boot"].(map[string]any)["BootSourceOverrideMode"], "the override mode is still there")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			secureBoot, err := walk(t, c).Systems[0].System.SecureBoot()
			require.NoError(t, err)
			assert.Nil(t, secureBoot, "no link: nothing to follow")
		},
	},
	"ZeroSystemUUID":        firmwareUUIDCase(bmcsim.Quirks{ZeroSystemUUID: true}, bmcsim.ZeroUUID),
	"AllFSystemUUID":        firmwareUUIDCase(bmcsim.Quirks{AllFSystemUUID: true}, bmcsim.AllFUUID),
	"PlaceholderSystemUUID": firmwareUUIDCase(bmcsim.Quirks{PlaceholderSystemUUID: true}, bmcsim.PlaceholderUUID),
	"SameUUIDEverywhere": {
		quirks: bmcsim.Quirks{SameUUIDEverywhere: true}, opts: systems(bmcsim.DefaultSystem(1), bmcsim.DefaultSystem(2)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			want := bmcsim.DefaultSystem(1).UUID
			assert.Equal(t, want, getOK(t, b, "/redfish/v1/")["UUID"])
			assert.Equal(t, want, getOK(t, b, "/redfish/v1/Systems/1")["UUID"])
			assert.Equal(t, want, getOK(t, b, "/redfish/v1/Systems/2")["UUID"])
			assert.Equal(t, want, getOK(t, b, "/redfish/v1/Managers/BMC")["UUID"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			tr := walk(t, c)
			require.Len(t, tr.Systems, 2)
			assert.Equal(t, c.Service.UUID, tr.Systems[0].System.UUID)
			assert.Equal(t, tr.Systems[0].System.UUID, tr.Systems[1].System.UUID)
			assert.Equal(t, tr.Manager.UUID, tr.Systems[1].System.UUID)
		},
	},
	"PlaceholderStrings": {
		quirks: bmcsim.Quirks{PlaceholderStrings: true}, opts: systems(bmcsim.DefaultSystem(0)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			sys := getOK(t, b, "/redfish/v1/Systems/1")
			assert.Equal(t, "To be filled by O.E.M.", sys["SKU"])
			assert.Equal(t, "01234567890123456789AB", sys["PartNumber"])
			assert.Equal(t, "Simulated Server ", sys["Model"])
			assert.Equal(t, "...................", getOK(t, b, "/redfish/v1/Chassis/1")["SerialNumber"])
			model := getOK(t, b, "/redfish/v1/Systems/1/Storage/1/Drives/Disk1")["Model"].(string)
			assert.Len(t, model, 40)
			assert.True(t, strings.HasSuffix(model, " "))
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			assert.Equal(t, "Simulated Server", strings.TrimSpace(v.System.Model))
			assert.Equal(t, "Contoso", strings.TrimSpace(v.System.Manufacturer))
			assert.Equal(t, "SAMSUNG MZQL2960HCJR-00A07", strings.TrimSpace(v.Drives[0].Model))
			assert.Equal(t, bmcsim.DefaultSystem(0).SerialNumber, v.System.SerialNumber)
		},
	},
	"TrailingSlashIDs": {
		quirks: bmcsim.Quirks{TrailingSlashIDs: true}, opts: systems(bmcsim.DefaultSystem(1)), session: true,
		wire: func(t *testing.T, b *bmcsim.BMC) {
			for _, p := range []string{"/redfish/v1/", "/redfish/v1/Systems", "/redfish/v1/Systems/1", "/redfish/v1/Systems/1/Storage/1"} {
				for _, id := range odataIDs(getOK(t, b, p)) {
					path, _, _ := strings.Cut(id, "#") // a JSON-pointer fragment follows the slash
					assert.True(t, strings.HasSuffix(path, "/"), "%s in %s", id, p)
				}
			}
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			assert.Len(t, v.Drives, 4)
			assert.Len(t, v.Memory, 16)
			session, err := c.GetSession()
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(session.ID, "/"), "the Location header follows the quirk too")
		},
	},
	"LowercaseIDs": {
		quirks: bmcsim.Quirks{LowercaseIDs: true},
		opts:   bmcsim.Options{Profile: bmcsim.ProfileDell, Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(1)}},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.Equal(t, []string{"/redfish/v1/systems/system.embedded.1"}, memberIDs(t, getOK(t, b, "/redfish/v1/Systems")))
			sys := getOK(t, b, "/redfish/v1/systems/system.embedded.1")
			assert.Equal(t, "System.Embedded.1", sys["Id"], "the Id keeps its case")
			assert.Equal(t, "/redfish/v1/systems/system.embedded.1", sys["@odata.id"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			assert.Equal(t, "System.Embedded.1", v.System.ID)
			assert.Len(t, v.NICs, 4)
			require.NoError(t, v.System.Reset(redfish.OnResetType), "the lower-case action target works")
			assert.Equal(t, "On", b.PowerState("System.Embedded.1"))
		},
	},
	"NullMembers": {
		quirks: bmcsim.Quirks{NullMembers: true},
		opts:   systems(bmcsim.SystemSpec{SerialNumber: "BARE-1", Processors: bmcsim.DefaultSystem(0).Processors}),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			nics := getOK(t, b, "/redfish/v1/Systems/1/EthernetInterfaces")
			assert.Contains(t, nics, "Members")
			assert.Nil(t, nics["Members"])
			storage := getOK(t, b, "/redfish/v1/Systems/1/Storage/1")
			assert.Contains(t, storage, "Drives")
			assert.Nil(t, storage["Drives"])
			assert.Nil(t, getOK(t, b, "/redfish/v1/SessionService/Sessions")["Members"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			assert.Empty(t, v.NICs)
			assert.Empty(t, v.Drives)
			assert.Empty(t, v.Memory)
			assert.Len(t, v.Processors, 1)
		},
	},
	"CountMismatch": {
		quirks: bmcsim.Quirks{CountMismatch: true}, opts: systems(bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(1)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			coll := getOK(t, b, "/redfish/v1/Systems")
			assert.Len(t, memberIDs(t, coll), 2)
			assert.EqualValues(t, 3, coll["Members@odata.count"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			tr := walk(t, c)
			assert.Len(t, tr.Systems, 2, "members, not the count, say what exists")
			assert.Len(t, tr.system(t, "2").Memory, 16)
		},
	},
	"GPUsFirst": {
		quirks: bmcsim.Quirks{GPUsFirst: true}, opts: systems(bmcsim.DefaultSystem(3)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			ids := memberIDs(t, getOK(t, b, "/redfish/v1/Systems/1/Processors"))
			require.Len(t, ids, 4)
			assert.True(t, strings.HasSuffix(ids[0], "/GPU1"), ids[0])
			assert.True(t, strings.HasSuffix(ids[3], "/CPU2"), ids[3])
			gpu := getOK(t, b, ids[0])
			assert.Contains(t, gpu, "Model")
			assert.Nil(t, gpu["Model"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			cpus := 0
			for _, p := range v.Processors {
				if p.ProcessorType == redfish.CPUProcessorType {
					cpus++
				}
			}
			assert.Equal(t, 2, cpus)
			assert.Equal(t, 2, v.System.ProcessorSummary.Count, "the summary counts CPU sockets only")
		},
	},
	"AbsentDIMMs": {
		quirks: bmcsim.Quirks{AbsentDIMMs: true}, opts: systems(bmcsim.DefaultSystem(0)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.Len(t, memberIDs(t, getOK(t, b, "/redfish/v1/Systems/1/Memory")), 8)
			slot := getOK(t, b, "/redfish/v1/Systems/1/Memory/EmptySlot1")
			assert.Equal(t, "Absent", slot["Status"].(map[string]any)["State"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			require.Len(t, v.Memory, 8)
			present := 0
			for _, d := range v.Memory {
				if d.Status.State != "Absent" {
					present++
				}
			}
			assert.Equal(t, 4, present)
			assert.InDelta(t, 64, v.System.MemorySummary.TotalSystemMemoryGiB, 0.001)
		},
	},
	"NICsWithoutMAC": {
		quirks: bmcsim.Quirks{NICsWithoutMAC: true}, opts: systems(bmcsim.DefaultSystem(0)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			up := getOK(t, b, "/redfish/v1/Systems/1/EthernetInterfaces/NIC1")
			assert.NotContains(t, up, "PermanentMACAddress")
			assert.Equal(t, bmcsim.DefaultSystem(0).NICs[0].MACAddress, up["MACAddress"])
			for _, k := range []string{"SpeedMbps", "LinkStatus", "Status"} {
				assert.Contains(t, up, k)
				assert.Nil(t, up[k], k)
			}
			assert.Nil(t, getOK(t, b, "/redfish/v1/Systems/1/EthernetInterfaces/NIC2")["MACAddress"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			v := walk(t, c).Systems[0]
			require.Len(t, v.NICs, 2)
			byID := map[string]*redfish.EthernetInterface{v.NICs[0].ID: v.NICs[0], v.NICs[1].ID: v.NICs[1]}
			assert.Equal(t, bmcsim.DefaultSystem(0).NICs[0].MACAddress, byID["NIC1"].MACAddress)
			assert.Empty(t, byID["NIC1"].PermanentMACAddress)
			assert.Empty(t, byID["NIC2"].MACAddress)
		},
	},
	"FloatMemoryGiB": {
		quirks: bmcsim.Quirks{FloatMemoryGiB: true}, opts: systems(bmcsim.DefaultSystem(1)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			summary := getOK(t, b, "/redfish/v1/Systems/1")["MemorySummary"].(map[string]any)
			assert.Equal(t, 476.837158, summary["TotalSystemMemoryGiB"], "512 GiB read as decimal GB")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			assert.InDelta(t, 476.837, walk(t, c).Systems[0].System.MemorySummary.TotalSystemMemoryGiB, 0.001)
		},
	},
	"ResetTypesOnlyInActionInfo": {
		quirks: bmcsim.Quirks{ResetTypesOnlyInActionInfo: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			reset := getOK(t, b, "/redfish/v1/Systems/1")["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)
			assert.NotContains(t, reset, "ResetType@Redfish.AllowableValues")
			info := getOK(t, b, reset["@Redfish.ActionInfo"].(string))
			param := info["Parameters"].([]any)[0].(map[string]any)
			assert.Equal(t, "ResetType", param["Name"])
			assert.Contains(t, param["AllowableValues"], "ForceOff")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			assert.Empty(t, s.SupportedResetTypes, "gofish does not read ActionInfo")
			require.NoError(t, s.Reset(redfish.OnResetType))
			assert.Equal(t, "On", b.PowerState("1"))
			err := s.Reset(redfish.PushPowerButtonResetType)
			assert.Equal(t, http.StatusBadRequest, statusOf(err), "the BMC still enforces its list: %v", err)
		},
	},
	"NoBootObject": {
		quirks: bmcsim.Quirks{NoBootObject: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "Boot")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			assert.Empty(t, s.Boot.BootSourceOverrideEnabled)
			err := s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled})
			assert.Equal(t, http.StatusBadRequest, statusOf(err), "%v", err)
			assert.Contains(t, err.Error(), "PropertyUnknown")
		},
	},
	"NoResetAction": {
		quirks: bmcsim.Quirks{NoResetAction: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "Actions")
			status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
			assert.Equal(t, http.StatusNotFound, status)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			err := walk(t, c).Systems[0].System.Reset(redfish.OnResetType)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "no target")
			assert.Equal(t, "Off", b.PowerState("1"))
		},
	},
	"BootOnceOnly": {
		quirks: bmcsim.Quirks{BootOnceOnly: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			boot := getOK(t, b, "/redfish/v1/Systems/1")["Boot"].(map[string]any)
			assert.Equal(t, []any{"Disabled", "Once"}, boot["BootSourceOverrideEnabled@Redfish.AllowableValues"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			err := s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.ContinuousBootSourceOverrideEnabled})
			assert.Equal(t, http.StatusBadRequest, statusOf(err), "%v", err)
			require.NoError(t, s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}))
			target, enabled := b.BootOverride("1")
			assert.Equal(t, bmcsim.BootPxe, target)
			assert.Equal(t, "Once", enabled)
		},
	},
	"CdOverrideBootsPhysicalDrive": {
		quirks: bmcsim.Quirks{CdOverrideBootsPhysicalDrive: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			reset := func() bmcsim.BootTarget {
				t.Helper()
				status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceRestart"})
				require.Equal(t, http.StatusNoContent, status)
				log := b.BootLog("1")
				return log[len(log)-1].Boot
			}
			status, _, _ := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
			require.Equal(t, http.StatusNoContent, status)
			assert.Equal(t, bmcsim.BootPhysicalCd, reset(), "Cd is the physical drive")

			mgr := getOK(t, b, "/redfish/v1/Managers/BMC")
			action := mgr["Actions"].(map[string]any)["Oem"].(map[string]any)["#OemManager.v1_0_0#OemManager.ImportSystemConfiguration"].(map[string]any)
			profile := `<SystemConfiguration><Component FQDD="BMC"><Attribute Name="ServerBoot.1#BootOnce">Enabled</Attribute>` +
				`<Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute></Component></SystemConfiguration>`
			status, header, _ := call(t, b, http.MethodPost, action["target"].(string), map[string]any{"ShareParameters": map[string]any{"Target": "ALL"}, "ImportBuffer": profile})
			require.Equal(t, http.StatusAccepted, status)
			task := getOK(t, b, header.Get("Location"))
			assert.Equal(t, "Completed", task["TaskState"])
			target, enabled := b.BootOverride("1")
			assert.Equal(t, bmcsim.BootCd, target)
			assert.Equal(t, "Once", enabled)
			assert.Equal(t, bmcsim.BootCd, reset(), "VCD-DVD: the virtual CD")
			assert.Equal(t, bmcsim.BootHdd, reset(), "once")

			status, _, body := call(t, b, http.MethodPost, action["target"].(string), map[string]any{"ImportBuffer": `<SystemConfiguration><Component FQDD="BMC"><Attribute Name="Users.2#Password">x</Attribute></Component></SystemConfiguration>`})
			assert.Equal(t, http.StatusBadRequest, status, "other attributes are not simulated")
			assert.Contains(t, messageID(body), "ActionParameterValue")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			require.NoError(t, s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}))
			require.NoError(t, s.Reset(redfish.ForceRestartResetType))
			log := b.BootLog("1")
			assert.Equal(t, bmcsim.BootPhysicalCd, log[len(log)-1].Boot, "the standard Cd override through gofish: the physical drive")
		},
	},
	"RejectBootModePatch": {
		quirks: bmcsim.Quirks{RejectBootModePatch: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			status, _, body := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "UEFI"}})
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, "Base.1.8.PropertyNotWritable", messageID(body))
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			err := s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget,
				BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled, BootSourceOverrideMode: redfish.UEFIBootSourceOverrideMode})
			assert.Equal(t, http.StatusBadRequest, statusOf(err), "%v", err)
			target, _ := b.BootOverride("1")
			assert.Equal(t, bmcsim.BootNone, target, "a refused PATCH changes nothing")
			require.NoError(t, s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget,
				BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}))
		},
	},
	"BareServiceRoot": {
		quirks: bmcsim.Quirks{BareServiceRoot: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			_, _, root := call(t, b, http.MethodGet, "/redfish/v1/", nil, "Authorization", "")
			for _, k := range []string{"UUID", "Vendor", "Product"} {
				assert.NotContains(t, root, k)
			}
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			assert.Empty(t, c.Service.UUID)
			assert.Empty(t, c.Service.Vendor)
			assert.Len(t, walk(t, c).Systems, 1)
		},
	},
	"ResetConflictInState": {
		quirks: bmcsim.Quirks{ResetConflictInState: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			reset := "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
			status, _, _ := call(t, b, http.MethodPost, reset, map[string]string{"ResetType": "ForceOff"})
			assert.Equal(t, http.StatusConflict, status, "off already: refused")
			status, _, _ = call(t, b, http.MethodPost, reset, map[string]string{"ResetType": "On"})
			require.Equal(t, http.StatusNoContent, status)
			status, _, body := call(t, b, http.MethodPost, reset, map[string]string{"ResetType": "On"})
			assert.Equal(t, http.StatusConflict, status, "on already: refused")
			assert.Contains(t, fmt.Sprint(body), "already powered on")
			assert.Len(t, b.BootLog("1"), 1, "the refused On booted nothing")
			status, _, _ = call(t, b, http.MethodPost, reset, map[string]string{"ResetType": "ForceRestart"})
			assert.Equal(t, http.StatusNoContent, status, "a restart is never refused")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			if s.PowerState != redfish.OnPowerState {
				require.NoError(t, s.Reset(redfish.OnResetType))
			}
			err := s.Reset(redfish.OnResetType)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "409")
		},
	},
	"IgnoresResets": {
		quirks: bmcsim.Quirks{IgnoresResets: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			reset := "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
			for _, rt := range []string{"On", "ForceRestart", "PowerCycle"} {
				status, _, _ := call(t, b, http.MethodPost, reset, map[string]string{"ResetType": rt})
				assert.Equal(t, http.StatusNoContent, status, "%s accepted", rt)
			}
			assert.Equal(t, "Off", b.PowerState("1"), "and nothing happened")
			assert.Equal(t, "Off", getOK(t, b, "/redfish/v1/Systems/1")["PowerState"])
			assert.Empty(t, b.BootLog("1"), "nothing booted")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			require.NoError(t, s.Reset(redfish.OnResetType), "the BMC says yes")
			assert.Equal(t, redfish.OffPowerState, walk(t, c).Systems[0].System.PowerState, "and does nothing")
		},
	},
	"NoPowerState": {
		quirks: bmcsim.Quirks{NoPowerState: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "PowerState")
			status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
			require.Equal(t, http.StatusNoContent, status)
			assert.Equal(t, "On", b.PowerState("1"), "resets still work")
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "PowerState", "but the state is never shown")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			assert.Empty(t, walk(t, c).Systems[0].System.PowerState)
		},
	},
	"MalformedResetType": {
		quirks: bmcsim.Quirks{MalformedResetType: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			sys := getOK(t, b, "/redfish/v1/Systems/1")
			reset := sys["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)
			allowed := fmt.Sprint(reset["ResetType@Redfish.AllowableValues"])
			assert.Contains(t, allowed, "Force Off ")
			assert.Contains(t, allowed, "ForceOff")
			status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "Force Off "})
			assert.Equal(t, http.StatusBadRequest, status, "the malformed value is not one the BMC takes")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			assert.Contains(t, fmt.Sprint(s.SupportedResetTypes), "Force Off ")
		},
	},
	"PowerStateLag": {
		quirks: bmcsim.Quirks{PowerStateLag: time.Hour},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
			require.Equal(t, http.StatusNoContent, status)
			assert.Equal(t, "On", b.PowerState("1"), "the host is on")
			assert.Equal(t, "Off", getOK(t, b, "/redfish/v1/Systems/1")["PowerState"], "the BMC has not noticed yet")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			assert.Equal(t, redfish.OffPowerState, s.PowerState, "gofish sees the lagging state")
			assert.Len(t, b.BootLog("1"), 1, "the host booted even though the BMC still says Off")
		},
	},
}

func init() {
	for name, qc := range mediaQuirkCases {
		quirkCases[name] = qc
	}
}

func TestEveryQuirkIsTested(t *testing.T) {
	for _, name := range bmcsim.QuirkNames() {
		assert.Contains(t, quirkCases, name, "quirk %s needs a case in quirkCases", name)
	}
	assert.Len(t, quirkCases, len(bmcsim.QuirkNames()))
}

// firmwareUUIDCase is a quirk whose firmware left one UUID in every system's SMBIOS: each system
// reports it, on the wire and through gofish, and it is what the host reads in-band too; the
// service root and manager keep UUIDs of their own.
func firmwareUUIDCase(q bmcsim.Quirks, want string) quirkCase {
	return quirkCase{
		quirks: q, opts: systems(bmcsim.DefaultSystem(1), bmcsim.DefaultSystem(2)),
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.Equal(t, want, getOK(t, b, "/redfish/v1/Systems/1")["UUID"])
			assert.Equal(t, want, getOK(t, b, "/redfish/v1/Systems/2")["UUID"], "every board of the firmware has it")
			assert.NotEqual(t, want, getOK(t, b, "/redfish/v1/Managers/BMC")["UUID"])
			assert.Equal(t, want, q.HostUUID(bmcsim.DefaultSystem(1).UUID), "the host reads what the BMC reports")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			tr := walk(t, c)
			require.Len(t, tr.Systems, 2)
			for _, v := range tr.Systems {
				assert.Equal(t, want, v.System.UUID)
				assert.NotEmpty(t, v.System.SerialNumber, "the rest of the identity is there")
			}
			assert.NotEqual(t, tr.Systems[0].System.SerialNumber, tr.Systems[1].System.SerialNumber)
		},
	}
}

func TestQuirksOnTheWireAndThroughGofish(t *testing.T) {
	for name, qc := range quirkCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := qc.opts
			q := qc.quirks
			opts.Quirks, opts.TLS = &q, true
			b := start(t, opts)
			qc.wire(t, b)
			qc.gofish(t, b, connect(t, b, !qc.session))
		})
	}
}

func TestPowerStateLagEndsOnItsOwn(t *testing.T) {
	b := start(t, bmcsim.Options{Quirks: &bmcsim.Quirks{PowerStateLag: 50 * time.Millisecond}})
	status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
	require.Equal(t, http.StatusNoContent, status)
	eventually(t, func() bool { return getOK(t, b, "/redfish/v1/Systems/1")["PowerState"] == "On" }, "PowerState catches up after the lag")
}

func TestParseQuirks(t *testing.T) {
	q, err := bmcsim.ParseQuirks("NoSystemUUID, gpusfirst,PowerStateLag=2s")
	require.NoError(t, err)
	assert.Equal(t, bmcsim.Quirks{NoSystemUUID: true, GPUsFirst: true, PowerStateLag: 2 * time.Second}, q)

	for _, bad := range []string{"NoSuchQuirk", "GPUsFirst=yes", "PowerStateLag=soon", "PowerStateLag=-1s"} {
		_, err := bmcsim.ParseQuirks(bad)
		assert.Error(t, err, bad)
	}
	q, err = bmcsim.ParseQuirks("")
	require.NoError(t, err)
	assert.Equal(t, bmcsim.Quirks{}, q)
	assert.True(t, slices.Contains(bmcsim.QuirkNames(), "PowerStateLag"))
}
