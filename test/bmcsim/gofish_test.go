package bmcsim_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func TestTLSIsVerifiedAgainstTheBMCsOwnCertificate(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	require.Contains(t, b.URL(), "https://127.0.0.1:")
	require.NotNil(t, b.CACertPEM())

	// Trusting the CA: verification on (Insecure false) and it succeeds.
	c := connect(t, b, false)
	require.NotNil(t, c.Service)

	// Not trusting it: the same client setup without the CA must fail the handshake.
	_, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: testPass})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")

	// Another BMC's certificate does not vouch for this one.
	other := start(t, bmcsim.Options{TLS: true})
	_, err = gofish.Connect(gofish.ClientConfig{
		Endpoint: b.URL(), Username: testUser, Password: testPass, HTTPClient: httpClient(t, other),
	})
	require.Error(t, err)
}

func TestPlainHTTPHasNoCertificate(t *testing.T) {
	b := start(t, bmcsim.Options{})
	assert.Contains(t, b.URL(), "http://127.0.0.1:")
	assert.Nil(t, b.CACertPEM())
	assert.Equal(t, b.URL(), "http://"+b.Host())
}

func TestGofishReadsTheInventory(t *testing.T) {
	specs := []bmcsim.SystemSpec{bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(3)}
	for _, mode := range []struct {
		name  string
		basic bool
	}{{"basic auth", true}, {"session auth", false}} {
		t.Run(mode.name, func(t *testing.T) {
			b := start(t, bmcsim.Options{TLS: true, Systems: specs, FirmwareVersion: "9.9.9", SerialNumber: "BMC-42"})
			tr := walk(t, connect(t, b, mode.basic))

			require.Len(t, tr.Systems, 2)
			for i, spec := range specs {
				v := tr.system(t, []string{"1", "2"}[i])
				s := v.System
				assert.Equal(t, spec.UUID, s.UUID)
				assert.Equal(t, "Contoso", s.Manufacturer, "profile fills the manufacturer")
				assert.Equal(t, spec.SerialNumber, s.SerialNumber)
				assert.Equal(t, spec.SKU, s.SKU)
				assert.Equal(t, redfish.OffPowerState, s.PowerState)
				assert.Equal(t, spec.Processors[0].Model, s.ProcessorSummary.Model)

				cpus, totalMiB := 0, 0
				for _, p := range spec.Processors {
					if p.ProcessorType == "CPU" {
						cpus++
					}
				}
				for _, d := range spec.Memory {
					totalMiB += d.CapacityMiB
				}
				assert.Equal(t, cpus, s.ProcessorSummary.Count)
				assert.InDelta(t, float64(totalMiB)/1024, s.MemorySummary.TotalSystemMemoryGiB, 0.001)

				require.Len(t, v.Processors, len(spec.Processors))
				for _, p := range v.Processors {
					want := findBy(t, spec.Processors, func(sp bmcsim.Processor) bool { return sp.ID == p.ID })
					assert.Equal(t, want.Model, p.Model)
					assert.Equal(t, want.TotalCores, p.TotalCores)
					assert.Equal(t, want.ProcessorType, string(p.ProcessorType))
				}
				require.Len(t, v.Memory, len(spec.Memory))
				for _, d := range v.Memory {
					want := findBy(t, spec.Memory, func(sd bmcsim.DIMM) bool { return sd.ID == d.ID })
					assert.Equal(t, want.CapacityMiB, d.CapacityMiB)
					assert.Equal(t, want.SerialNumber, d.SerialNumber)
				}
				require.Len(t, v.Drives, len(spec.Drives))
				for _, d := range v.Drives {
					want := findBy(t, spec.Drives, func(sd bmcsim.Drive) bool { return sd.ID == d.ID })
					assert.Equal(t, want.CapacityBytes, d.CapacityBytes)
					assert.Equal(t, want.SerialNumber, d.SerialNumber)
					assert.Equal(t, want.Protocol, string(d.Protocol))
					assert.Equal(t, want.MediaType, string(d.MediaType))
				}
				require.Len(t, v.NICs, len(spec.NICs))
				for _, n := range v.NICs {
					want := findBy(t, spec.NICs, func(sn bmcsim.NIC) bool { return sn.ID == n.ID })
					assert.Equal(t, want.MACAddress, n.MACAddress)
					assert.Equal(t, want.MACAddress, n.PermanentMACAddress)
					if want.LinkUp {
						assert.Equal(t, want.SpeedMbps, n.SpeedMbps)
						assert.Equal(t, redfish.LinkUpLinkStatus, n.LinkStatus)
					} else {
						assert.Equal(t, redfish.LinkDownLinkStatus, n.LinkStatus)
					}
				}
			}
			assert.Equal(t, redfish.BMCManagerType, tr.Manager.ManagerType)
			assert.Equal(t, "9.9.9", tr.Manager.FirmwareVersion)
			assert.Equal(t, "BMC-42", tr.Manager.SerialNumber)
			assert.Equal(t, "bmcsim", tr.Manager.Model)
			assert.NotEmpty(t, tr.Manager.UUID)
			assert.Len(t, tr.Chassis, 2)

			st := b.Stats()
			assert.Positive(t, st.Requests)
			assert.Zero(t, st.AuthFailures)
			if mode.basic {
				assert.Zero(t, st.SessionsCreated)
			} else {
				assert.EqualValues(t, 1, st.SessionsCreated)
				assert.EqualValues(t, 1, st.ActiveSessions)
			}
		})
	}
}

func findBy[T any](t *testing.T, items []T, match func(T) bool) T {
	t.Helper()
	i := slices.IndexFunc(items, match)
	require.GreaterOrEqual(t, i, 0, "no matching item")
	return items[i]
}

func TestSessionsAreCountedAndEndedByLogout(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	c1, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: testPass, HTTPClient: httpClient(t, b)})
	require.NoError(t, err)
	c2, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: testPass, HTTPClient: httpClient(t, b)})
	require.NoError(t, err)
	session, err := c1.GetSession()
	require.NoError(t, err)
	assert.Regexp(t, `^/redfish/v1/SessionService/Sessions/\d+$`, session.ID, "Location names the session")
	assert.Len(t, session.Token, 32)

	st := b.Stats()
	assert.EqualValues(t, 2, st.SessionsCreated)
	assert.EqualValues(t, 2, st.ActiveSessions)
	sessions, err := c1.Service.Sessions()
	require.NoError(t, err)
	assert.Len(t, sessions, 2)
	assert.Equal(t, testUser, sessions[0].UserName)
	assert.Empty(t, sessions[0].Token, "a session resource never shows the token")

	c1.Logout()
	st = b.Stats()
	assert.EqualValues(t, 1, st.SessionsDeleted)
	assert.EqualValues(t, 1, st.ActiveSessions)
	// The ended session's token no longer works; the other one does.
	status, _, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems", nil, "Authorization", "", "X-Auth-Token", session.Token)
	assert.Equal(t, http.StatusUnauthorized, status)
	_, err = c2.Service.Systems()
	require.NoError(t, err)
	c2.Logout()
	assert.Zero(t, b.Stats().ActiveSessions)
}

func TestWrongPasswordIsRefusedAndCounted(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})

	_, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: "wrong", HTTPClient: httpClient(t, b)})
	require.Error(t, err)
	assert.Equal(t, http.StatusUnauthorized, statusOf(err), "session login: %v", err)

	// With Basic auth the public service root answers, but nothing behind it does.
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: "wrong", BasicAuth: true, HTTPClient: httpClient(t, b)})
	require.NoError(t, err)
	_, err = c.Service.Systems()
	require.Error(t, err)
	assert.Equal(t, http.StatusUnauthorized, statusOf(err))

	status, hdr, body := call(t, b, http.MethodGet, "/redfish/v1/Systems/1", nil, "Authorization", "")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "Base.1.8.NoValidSession", messageID(body))
	assert.Contains(t, hdr.Get("WWW-Authenticate"), "Basic")
	// Unknown paths are 401 too before login: existence is not revealed.
	status, _, _ = call(t, b, http.MethodGet, "/redfish/v1/NoSuchThing", nil, "Authorization", "")
	assert.Equal(t, http.StatusUnauthorized, status)
	status, _, _ = call(t, b, http.MethodGet, "/redfish/v1/NoSuchThing", nil)
	assert.Equal(t, http.StatusNotFound, status)

	assert.EqualValues(t, 4, b.Stats().AuthFailures)
	assert.Zero(t, b.Stats().SessionsCreated)
}

func TestSetCredentialsEndsOldSessions(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	c := connect(t, b, false)
	_, err := c.Service.Systems()
	require.NoError(t, err)

	b.SetCredentials("operator", "n3w-password")
	_, err = c.Service.Systems()
	assert.Equal(t, http.StatusUnauthorized, statusOf(err), "old session: %v", err)
	assert.Zero(t, b.Stats().ActiveSessions)
	status, _, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems", nil)
	assert.Equal(t, http.StatusUnauthorized, status, "old Basic credentials")

	nc, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: "operator", Password: "n3w-password", HTTPClient: httpClient(t, b)})
	require.NoError(t, err)
	defer nc.Logout()
	_, err = nc.Service.Systems()
	require.NoError(t, err)
}

func TestResetChangesPowerState(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	c := connect(t, b, false)
	systems, err := c.Service.Systems()
	require.NoError(t, err)
	sys := systems[0]
	assert.Contains(t, sys.SupportedResetTypes, redfish.OnResetType)

	require.NoError(t, sys.Reset(redfish.OnResetType))
	assert.Equal(t, "On", b.PowerState("1"))
	assert.Equal(t, "On", getOK(t, b, "/redfish/v1/Systems/1")["PowerState"])
	assert.Equal(t, "On", getOK(t, b, "/redfish/v1/Chassis/1")["PowerState"])

	require.NoError(t, sys.Reset(redfish.ForceOffResetType))
	assert.Equal(t, "Off", b.PowerState("1"))
	require.NoError(t, sys.Reset(redfish.PowerCycleResetType))
	assert.Equal(t, "On", b.PowerState("1"), "a power cycle of an off system powers it on")
	require.NoError(t, sys.Reset(redfish.GracefulShutdownResetType))
	assert.Equal(t, "Off", b.PowerState("1"), "graceful shutdown completes at once")
	require.NoError(t, sys.Reset(redfish.NmiResetType))
	assert.Equal(t, "Off", b.PowerState("1"), "an NMI does not change power")
	assert.EqualValues(t, 5, b.Stats().Resets)

	// A type the profile does not offer, or none at all, is refused with a Base message.
	status, _, body := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "PushPowerButton"})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "Base.1.8.ActionParameterValueNotInList", messageID(body))
	status, _, body = call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "Base.1.8.ActionParameterMissing", messageID(body))
	status, hdr, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	assert.Equal(t, "POST", hdr.Get("Allow"))
	assert.EqualValues(t, 5, b.Stats().Resets)
}

func TestBootOverrideOnceIsConsumedAtTheNextPowerOn(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true, Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(7)}})
	var mu sync.Mutex
	var hooked []bmcsim.PowerOnEvent
	b.OnPowerOn(func(ev bmcsim.PowerOnEvent) {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, ev)
	})
	c := connect(t, b, true)
	systems, err := c.Service.Systems()
	require.NoError(t, err)
	sys := systems[0]
	allowed := getOK(t, b, "/redfish/v1/Systems/1")["Boot"].(map[string]any)["BootSourceOverrideTarget@Redfish.AllowableValues"]
	assert.Contains(t, allowed, "Pxe")

	require.NoError(t, sys.SetBoot(redfish.Boot{
		BootSourceOverrideTarget:  redfish.PxeBootSourceOverrideTarget,
		BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
	}))
	target, enabled := b.BootOverride("1")
	assert.Equal(t, bmcsim.BootPxe, target)
	assert.Equal(t, "Once", enabled)

	require.NoError(t, sys.Reset(redfish.OnResetType))
	_, enabled = b.BootOverride("1")
	assert.Equal(t, "Disabled", enabled, "Once is consumed by the power-on")
	require.NoError(t, sys.Reset(redfish.ForceOffResetType))
	require.NoError(t, sys.Reset(redfish.OnResetType))

	log := b.BootLog("1")
	require.Len(t, log, 2)
	assert.Equal(t, bmcsim.BootPxe, log[0].Boot)
	assert.Equal(t, bmcsim.BootHdd, log[1].Boot, "after the override is used up the host boots from disk")
	assert.Equal(t, bmcsim.DefaultSystem(7).UUID, log[0].UUID)
	assert.Equal(t, "1", log[0].SystemID)
	assert.False(t, log[0].Time.After(log[1].Time))
	mu.Lock()
	assert.Equal(t, log, hooked, "the hook saw every power-on")
	mu.Unlock()
	assert.EqualValues(t, 1, b.Stats().BootPatches)

	// Continuous keeps applying; a restart of a running host is a power-on too. The system
	// changed since it was read (ETag), so a careful client reads it again before patching.
	sys, err = redfish.GetComputerSystem(c, sys.ODataID)
	require.NoError(t, err)
	require.NoError(t, sys.SetBoot(redfish.Boot{
		BootSourceOverrideTarget:  redfish.PxeBootSourceOverrideTarget,
		BootSourceOverrideEnabled: redfish.ContinuousBootSourceOverrideEnabled,
	}))
	require.NoError(t, sys.Reset(redfish.ForceRestartResetType))
	require.NoError(t, sys.Reset(redfish.GracefulRestartResetType))
	log = b.BootLog("1")
	require.Len(t, log, 4)
	assert.Equal(t, bmcsim.BootPxe, log[2].Boot)
	assert.Equal(t, bmcsim.BootPxe, log[3].Boot)
	_, enabled = b.BootOverride("1")
	assert.Equal(t, "Continuous", enabled)
}

func TestSetPowerStateBootsTheHostLikeAReset(t *testing.T) {
	b := start(t, bmcsim.Options{})
	var events []bmcsim.PowerOnEvent
	b.OnPowerOn(func(ev bmcsim.PowerOnEvent) { events = append(events, ev) })

	b.SetPowerState("1", "On")
	b.SetPowerState("1", "On") // no transition, no event
	assert.Equal(t, "On", b.PowerState("1"))
	assert.Equal(t, "On", getOK(t, b, "/redfish/v1/Systems/1")["PowerState"])
	require.Len(t, events, 1)
	assert.Equal(t, bmcsim.BootHdd, events[0].Boot)

	b.SetPowerState("1", "Sleeping") // not a power state: ignored
	b.SetPowerState("nope", "Off")   // unknown system: ignored
	assert.Equal(t, "On", b.PowerState("1"))
	assert.Empty(t, b.PowerState("nope"))
	assert.Nil(t, b.BootLog("nope"))
}

func TestPatchBootIsValidated(t *testing.T) {
	b := start(t, bmcsim.Options{})
	path := "/redfish/v1/Systems/1"
	for _, tc := range []struct {
		name  string
		body  any
		msgID string
	}{
		{"unknown target", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Floppy"}}, "Base.1.8.PropertyValueNotInList"},
		{"unknown enabled", map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Always"}}, "Base.1.8.PropertyValueNotInList"},
		{"wrong type", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": 3}}, "Base.1.8.PropertyValueNotInList"},
		{"unknown boot property", map[string]any{"Boot": map[string]any{"BootNext": "0001"}}, "Base.1.8.PropertyUnknown"},
		{"read-only property", map[string]any{"PowerState": "On"}, "Base.1.8.PropertyNotWritable"},
		{"not an object", []int{1}, "Base.1.8.MalformedJSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := call(t, b, http.MethodPatch, path, tc.body)
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, tc.msgID, messageID(body))
		})
	}
	assert.Zero(t, b.Stats().BootPatches)
	target, enabled := b.BootOverride("1")
	assert.Equal(t, bmcsim.BootNone, target)
	assert.Equal(t, "Disabled", enabled)
}

func TestPatchHonoursIfMatch(t *testing.T) {
	b := start(t, bmcsim.Options{})
	path := "/redfish/v1/Systems/1"
	_, hdr, _ := call(t, b, http.MethodGet, path, nil)
	etag := hdr.Get("ETag")
	require.NotEmpty(t, etag)
	pxe := map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}

	status, hdr, _ := call(t, b, http.MethodPatch, path, pxe, "If-Match", etag)
	require.Equal(t, http.StatusNoContent, status)
	assert.NotEqual(t, etag, hdr.Get("ETag"), "a change makes a new ETag")

	status, _, body := call(t, b, http.MethodPatch, path, pxe, "If-Match", etag)
	assert.Equal(t, http.StatusPreconditionFailed, status, "a stale ETag loses")
	assert.Equal(t, "Base.1.8.PreconditionFailed", messageID(body))

	status, _, _ = call(t, b, http.MethodPatch, path, pxe, "If-Match", "*")
	assert.Equal(t, http.StatusNoContent, status)
	assert.EqualValues(t, 2, b.Stats().BootPatches)
}
