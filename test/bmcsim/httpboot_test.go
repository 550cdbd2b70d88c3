package bmcsim_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// bootURI is what an operator would set: a URI naming a one-time token, a bearer secret.
const bootURI = "http://10.213.1.1:8080/boot/s3cr3t-t0ken/probe.iso"

func bootObject(t *testing.T, b *bmcsim.BMC) map[string]any {
	t.Helper()
	return getOK(t, b, "/redfish/v1/Systems/1")["Boot"].(map[string]any)
}

func TestHTTPBootURIIsStoredAndShown(t *testing.T) {
	b := start(t, bmcsim.Options{})
	boot := bootObject(t, b)
	assert.Equal(t, "", boot["HttpBootUri"], "shown, empty until set")
	assert.Contains(t, boot["BootSourceOverrideTarget@Redfish.AllowableValues"], "UefiHttp")

	_, header, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems/1", nil)
	status, patched, body := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1",
		map[string]any{"Boot": map[string]any{"HttpBootUri": bootURI}}, "If-Match", header.Get("ETag"))
	require.Equal(t, http.StatusNoContent, status, "%v", body)
	assert.NotEqual(t, header.Get("ETag"), patched.Get("ETag"), "the Boot object changed")
	assert.Equal(t, bootURI, bootObject(t, b)["HttpBootUri"])
	assert.Equal(t, int64(1), b.Stats().BootPatches)
	target, enabled := b.BootOverride("1")
	assert.Equal(t, bmcsim.BootNone, target, "setting the URI selects no target")
	assert.Equal(t, "Disabled", enabled)

	// The property is PATCHed with the override in one request, as clients do; an
	// uppercase scheme is still http.
	status, _, body = call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI",
		"HttpBootUri": "HTTPS://boot.example/x.iso",
	}})
	require.Equal(t, http.StatusNoContent, status, "%v", body)
	boot = bootObject(t, b)
	assert.Equal(t, "UefiHttp", boot["BootSourceOverrideTarget"])
	assert.Equal(t, "HTTPS://boot.example/x.iso", boot["HttpBootUri"])

	status, _, _ = call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{"HttpBootUri": ""}})
	require.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, "", bootObject(t, b)["HttpBootUri"], "an empty string clears it")
}

func TestHTTPBootURIThroughGofish(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	s := walk(t, connect(t, b, true)).Systems[0].System
	require.NoError(t, s.SetBoot(redfish.Boot{
		BootSourceOverrideTarget: redfish.UefiHTTPBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
		BootSourceOverrideMode: redfish.UEFIBootSourceOverrideMode, HTTPBootURI: bootURI,
	}))
	again := walk(t, connect(t, b, true)).Systems[0].System
	assert.Equal(t, bootURI, again.Boot.HTTPBootURI)
	assert.Equal(t, redfish.UefiHTTPBootSourceOverrideTarget, again.Boot.BootSourceOverrideTarget)
}

func TestHTTPBootURIMustBeAnHTTPURL(t *testing.T) {
	b := start(t, bmcsim.Options{})
	status, _, _ := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{"HttpBootUri": bootURI}})
	require.Equal(t, http.StatusNoContent, status)
	for _, bad := range []any{
		"tftp://10.0.0.1/s3cr3t-t0ken/x.efi", "s3cr3t-t0ken.iso", "/boot/s3cr3t-t0ken/x.iso", "http:///s3cr3t-t0ken",
		"http://10.0.0.1:bad/s3cr3t-t0ken", 42, nil, []string{"http://10.0.0.1/s3cr3t-t0ken"},
	} {
		status, _, body := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{
			"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "HttpBootUri": bad,
		}})
		assert.Equal(t, http.StatusBadRequest, status, "%v", bad)
		assert.Equal(t, "Base.1.8.PropertyValueFormatError", messageID(body), "%v", bad)
		raw, _ := json.Marshal(body)
		assert.NotContains(t, string(raw), "s3cr3t-t0ken", "the refused value is not echoed")
	}
	boot := bootObject(t, b)
	assert.Equal(t, bootURI, boot["HttpBootUri"], "a refused PATCH changes nothing")
	assert.Equal(t, "None", boot["BootSourceOverrideTarget"])
	assert.Equal(t, int64(1), b.Stats().BootPatches)
}

// powerRecorder collects what the hooks tell a host behind the BMC.
type powerRecorder struct {
	mu      sync.Mutex
	boots   []bmcsim.PowerOnEvent
	actions []bmcsim.PowerAction
}

func recordPower(b *bmcsim.BMC) *powerRecorder {
	r := &powerRecorder{}
	b.OnPowerOn(func(ev bmcsim.PowerOnEvent) { r.mu.Lock(); r.boots = append(r.boots, ev); r.mu.Unlock() })
	b.OnPowerAction(func(a bmcsim.PowerAction) { r.mu.Lock(); r.actions = append(r.actions, a); r.mu.Unlock() })
	return r
}

// last is the latest power-on and action: what the host booted, and was told to.
func (r *powerRecorder) last(t *testing.T) (bmcsim.PowerOnEvent, bmcsim.PowerAction) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.boots)
	require.NotEmpty(t, r.actions)
	return r.boots[len(r.boots)-1], r.actions[len(r.actions)-1]
}

func TestUefiHttpBootCarriesTheURI(t *testing.T) {
	b := start(t, bmcsim.Options{})
	rec := recordPower(b)
	patch := func(boot map[string]any) {
		t.Helper()
		status, _, body := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": boot})
		require.Equal(t, http.StatusNoContent, status, "%v", body)
	}
	reset := func(rt string) (bmcsim.PowerOnEvent, bmcsim.PowerAction) {
		t.Helper()
		status, _, body := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt})
		require.Equal(t, http.StatusNoContent, status, "%v", body)
		return rec.last(t)
	}

	// A one-time UEFI HTTP boot of a URI, as the operator asks for it.
	patch(map[string]any{"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once",
		"BootSourceOverrideMode": "UEFI", "HttpBootUri": bootURI})
	ev, action := reset("On")
	assert.Equal(t, bmcsim.BootUefiHttp, ev.Boot)
	assert.Equal(t, bootURI, ev.HTTPBootURI)
	assert.Equal(t, bmcsim.BootUefiHttp, action.Boot)
	assert.Equal(t, bootURI, action.HTTPBootURI, "the host is told which URI to boot")
	log := b.BootLog("1")
	assert.Equal(t, bootURI, log[len(log)-1].HTTPBootURI)

	// Once is used up: the disk, and no URI, though the BMC still shows it.
	ev, action = reset("ForceRestart")
	assert.Equal(t, bmcsim.BootHdd, ev.Boot)
	assert.Empty(t, ev.HTTPBootURI)
	assert.Empty(t, action.HTTPBootURI)
	assert.Equal(t, bootURI, bootObject(t, b)["HttpBootUri"])

	// Pxe with a URI stored: PXE knows no URI.
	patch(map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"})
	ev, action = reset("ForceRestart")
	assert.Equal(t, bmcsim.BootPxe, ev.Boot)
	assert.Empty(t, ev.HTTPBootURI)
	assert.Empty(t, action.HTTPBootURI)

	// UefiHttp without a URI: the firmware takes DHCP's.
	patch(map[string]any{"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "HttpBootUri": ""})
	ev, action = reset("ForceRestart")
	assert.Equal(t, bmcsim.BootUefiHttp, ev.Boot)
	assert.Empty(t, ev.HTTPBootURI)
	assert.Equal(t, bmcsim.BootUefiHttp, action.Boot)
	assert.Empty(t, action.HTTPBootURI)

	// Continuous: every boot, through a power-off and SetPowerState too.
	patch(map[string]any{"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Continuous", "HttpBootUri": bootURI})
	ev, _ = reset("PowerCycle")
	assert.Equal(t, bootURI, ev.HTTPBootURI)
	b.SetPowerState("1", "Off")
	b.SetPowerState("1", "On")
	ev, action = rec.last(t)
	assert.Equal(t, bmcsim.BootUefiHttp, ev.Boot)
	assert.Equal(t, bootURI, ev.HTTPBootURI)
	assert.Equal(t, bootURI, action.HTTPBootURI)
	assert.Empty(t, action.ResetType, "a SetPowerState transition")
}

// noHTTPBootURICase: no HttpBootUri, no UefiHttp target; PATCHes naming either are refused.
func noHTTPBootURICase() quirkCase {
	return quirkCase{
		quirks: bmcsim.Quirks{NoHTTPBootURI: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			boot := bootObject(t, b)
			assert.NotContains(t, boot, "HttpBootUri")
			assert.NotContains(t, boot["BootSourceOverrideTarget@Redfish.AllowableValues"], "UefiHttp")
			assert.Contains(t, boot["BootSourceOverrideTarget@Redfish.AllowableValues"], "Pxe")

			status, _, body := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{"HttpBootUri": bootURI}})
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, "Base.1.8.PropertyUnknown", messageID(body))
			status, _, body = call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]any{
				"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once"}})
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, "Base.1.8.PropertyValueNotInList", messageID(body))
			target, _ := b.BootOverride("1")
			assert.Equal(t, bmcsim.BootNone, target, "a refused PATCH changes nothing")
			assert.Zero(t, b.Stats().BootPatches)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			assert.Empty(t, s.Boot.HTTPBootURI)
			err := s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.UefiHTTPBootSourceOverrideTarget,
				BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled, HTTPBootURI: bootURI})
			assert.Equal(t, http.StatusBadRequest, statusOf(err), "%v", err)
			require.NoError(t, s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget,
				BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}), "Pxe is still there")
		},
	}
}

func init() { quirkCases["NoHTTPBootURI"] = noHTTPBootURICase() }

func TestNoHTTPBootURIIsDells(t *testing.T) {
	q, err := bmcsim.ProfileQuirks(bmcsim.ProfileDell)
	require.NoError(t, err)
	assert.True(t, q.NoHTTPBootURI)
	q, err = bmcsim.ParseQuirks("NoHTTPBootURI")
	require.NoError(t, err)
	assert.Equal(t, bmcsim.Quirks{NoHTTPBootURI: true}, q, "tests and binaries name it as text")
	for _, p := range bmcsim.Profiles() {
		if p == bmcsim.ProfileDell {
			continue
		}
		q, err := bmcsim.ProfileQuirks(p)
		require.NoError(t, err)
		assert.False(t, q.NoHTTPBootURI, p)
	}
}
