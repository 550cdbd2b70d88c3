package redfish_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/testenv"
)

const user, password = "admin", "s3cret-pass"

func startSim(t *testing.T, opts bmcsim.Options) *bmcsim.BMC {
	t.Helper()
	opts.TLS, opts.Username, opts.Password = true, user, password
	if len(opts.Systems) == 0 {
		opts.Systems = []bmcsim.SystemSpec{testSystem(0), testSystem(1)}
	}
	sim, err := bmcsim.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

func target(t *testing.T, sim *bmcsim.BMC, pass string) bmc.Target {
	t.Helper()
	addr, err := bmc.ParseAddress("redfish+https://" + sim.Host() + "/redfish/v1")
	require.NoError(t, err)
	return bmc.Target{Address: addr, Credentials: bmc.Credentials{Username: user, Password: pass}}
}

func trusting(sim *bmcsim.BMC) redfish.Options {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sim.CACertPEM())
	return redfish.Options{Timeout: 5 * time.Second, RootCAs: pool}
}

func connect(t *testing.T, sim *bmcsim.BMC) *redfish.Client {
	t.Helper()
	c, err := redfish.Connect(context.Background(), target(t, sim, password), trusting(sim))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestReadsSystemsManagerAndInventory(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Manufacturer: "Contoso", Model: "BMC-9000", FirmwareVersion: "1.2.3"})
	c := connect(t, sim)

	mgr, err := c.Manager(ctx)
	require.NoError(t, err)
	assert.Equal(t, "BMC-9000", mgr.Model)
	assert.Equal(t, "1.2.3", mgr.FirmwareVersion)

	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	require.Len(t, systems, 2)
	want := testSystem(1)
	got := systems[1]
	if systems[0].UUID == strings.ToLower(want.UUID) {
		got = systems[0]
	}
	assert.Equal(t, strings.ToLower(want.UUID), got.UUID)
	assert.Equal(t, want.Manufacturer, got.Manufacturer)
	assert.Equal(t, want.Model, got.Model)
	assert.Equal(t, want.SerialNumber, got.SerialNumber)
	assert.Equal(t, want.BIOSVersion, got.BIOSVersion)

	inv, err := c.Inventory(ctx, got.URI)
	require.NoError(t, err)
	assert.Equal(t, "Redfish", inv.Source)
	var cores int32
	for _, p := range want.Processors {
		if p.ProcessorType == "CPU" {
			cores += int32(p.TotalCores)
		}
	}
	assert.Equal(t, cores, inv.CPU.Cores)
	assert.Len(t, inv.Storage, len(want.Drives))
	assert.Len(t, inv.NetworkInterfaces, len(want.NICs))
}

func TestPowerAndOneTimeBoot(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	sys := systems[0]

	require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, ""))
	target, enabled := sim.BootOverride(sys.ID)
	assert.Equal(t, bmcsim.BootTarget("Pxe"), target)
	assert.Equal(t, "Once", enabled)

	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
	assert.Equal(t, "On", sim.PowerState(sys.ID))
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOff))
	assert.Equal(t, "Off", sim.PowerState(sys.ID))
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))

	log := sim.BootLog(sys.ID)
	require.Len(t, log, 2)
	assert.Equal(t, bmcsim.BootTarget("Pxe"), log[0].Boot, "the first power-on used the override")
	assert.Equal(t, bmcsim.BootTarget("Hdd"), log[1].Boot, "the override was consumed: the next boot is from disk")
}

// TestPowerIsIdempotentOnABMCThatRefusesTheStateItIsIn: a BMC that answers 409 to On for a
// system that is on (iDRAC) has done what was asked: SetPower succeeds and nothing boots again;
// a refusal that is not about the state stays an error.
func TestPowerIsIdempotentOnABMCThatRefusesTheStateItIsIn(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Quirks: &bmcsim.Quirks{ResetConflictInState: true}})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	sys := systems[0]

	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
	require.Len(t, sim.BootLog(sys.ID), 1)
	before := sim.Stats().Resets
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn), "on already: done")
	assert.Equal(t, before, sim.Stats().Resets, "the BMC refused it (409) and nothing changed")
	assert.Len(t, sim.BootLog(sys.ID), 1, "nothing booted again")
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOff))
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOff), "off already: done")
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerGracefulShutdown), "off already: done")
	assert.Equal(t, "Off", sim.PowerState(sys.ID))
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerForceRestart), "a restart is never refused as done")
	assert.Equal(t, "On", sim.PowerState(sys.ID))
}

func TestErrorsAreClassified(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})

	_, err := redfish.Connect(ctx, target(t, sim, "wrong"), trusting(sim))
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonAuthenticationFailed, bmc.Reason(err))
	assert.NotContains(t, err.Error(), password)

	_, err = redfish.Connect(ctx, target(t, sim, password), redfish.Options{Timeout: 5 * time.Second})
	require.Error(t, err, "an untrusted certificate is refused: TLS is verified")
	assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
	assert.Contains(t, err.Error(), "not trusted")

	insecure := target(t, sim, password)
	insecure.InsecureSkipVerify = true
	c, err := redfish.Connect(ctx, insecure, redfish.Options{Timeout: 5 * time.Second})
	require.NoError(t, err, "a BMC that opts out of verification connects")
	c.Close()

	closed := target(t, sim, password)
	closed.Address.Endpoint = "https://127.0.0.1:1"
	_, err = redfish.Connect(ctx, closed, trusting(sim))
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonUnreachable, bmc.Reason(err))

	c = connect(t, sim)
	sim.SetFaults(bmcsim.Faults{ErrorRate: 1})
	_, err = c.Systems(ctx)
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
	sim.SetFaults(bmcsim.Faults{})
}

// TestCollectionFailuresAreClassified: reading the systems or managers fails as the failing
// request did, whether the collection or one of its members failed, and says so briefly. A
// session the BMC no longer accepts (its password changed) reads as refused credentials, so the
// caller drops it and logs in again, instead of retrying a dead session for ever.
func TestCollectionFailuresAreClassified(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})
	opts := trusting(sim)
	opts.Timeout = 500 * time.Millisecond
	c, err := redfish.Connect(ctx, target(t, sim, password), opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)

	sim.SetFaults(bmcsim.Faults{ErrorRate: 1, Seed: 1})
	_, err = c.Systems(ctx)
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
	assert.Regexp(t, `^listing systems: reading /redfish/v1/Systems: HTTP 50[03]: The (request failed|service is temporarily unavailable)`, err.Error())
	assert.NotContains(t, err.Error(), "{", "no JSON dump")

	sim.SetFaults(bmcsim.Faults{TimeoutRate: 1, Seed: 1})
	_, err = c.Manager(ctx)
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonUnreachable, bmc.Reason(err), "%v", err)
	// net/http says "Client.Timeout exceeded", or only "context deadline exceeded" when its
	// deadline fires before it could tell whose it was (seen on a loaded machine).
	assert.Regexp(t, `Client\.Timeout|deadline exceeded`, err.Error(), "it says the request timed out")
	sim.SetFaults(bmcsim.Faults{})

	sim.SetCredentials(user, "changed-behind-our-back")
	for _, read := range []func() error{
		func() error { _, err := c.Systems(ctx); return err },
		func() error { _, err := c.Manager(ctx); return err },
	} {
		err := read()
		require.Error(t, err)
		assert.Equal(t, m.BMCReasonAuthenticationFailed, bmc.Reason(err), "%v", err)
		assert.Contains(t, err.Error(), "refused the credentials")
		assert.NotContains(t, err.Error(), password)
	}
}

// A Connector's clients share one transport per TLS setting; a BMC that opts out of
// verification never lends that to one that does not.
func TestConnectorSharesTransportsPerTLSSetting(t *testing.T) {
	ctx := context.Background()
	sim, other := startSim(t, bmcsim.Options{}), startSim(t, bmcsim.Options{})
	opts := trusting(sim)
	opts.RootCAs.AppendCertsFromPEM(other.CACertPEM())
	connect := redfish.Connector(opts)
	open := func(target bmc.Target) *redfish.Client {
		c, err := connect(ctx, target)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c.(*redfish.Client)
	}
	a, b := open(target(t, sim, password)), open(target(t, other, password))
	assert.Same(t, redfish.TransportOf(a), redfish.TransportOf(b), "verified BMCs share a transport")
	_, err := b.Systems(ctx)
	require.NoError(t, err)

	untrusted := startSim(t, bmcsim.Options{})
	insecure := target(t, untrusted, password)
	insecure.InsecureSkipVerify = true
	c := open(insecure)
	assert.NotSame(t, redfish.TransportOf(a), redfish.TransportOf(c), "an opted-out BMC has the other transport")
	_, err = connect(ctx, target(t, untrusted, password))
	require.Error(t, err, "the same BMC without the opt-out is still verified")
	assert.Contains(t, err.Error(), "not trusted")
}

// A connection closed between polls is reopened without a full handshake: the transport
// resumes the BMC's TLS session.
func TestReconnectResumesTheTLSSession(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})
	c, err := redfish.Connector(trusting(sim))(ctx, target(t, sim, password))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	transport := redfish.TransportOf(c.(*redfish.Client))
	get := func() *tls.ConnectionState {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, sim.URL()+"/redfish/v1/", nil)
		require.NoError(t, err)
		resp, err := transport.RoundTrip(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NotNil(t, resp.TLS)
		return resp.TLS
	}
	get()
	transport.CloseIdleConnections()
	assert.True(t, get().DidResume, "the second connection resumes the first one's session")

	// A session kept in a form that no longer parses is a full handshake, not a failure.
	kept, damage := redfish.SessionsOf(c.(*redfish.Client))
	require.Equal(t, 1, kept())
	u, err := url.Parse(sim.URL())
	require.NoError(t, err)
	damage(u.Hostname()) // crypto/tls keys sessions by server name

	transport.CloseIdleConnections()
	assert.False(t, get().DidResume, "a damaged session is not resumed")
	transport.CloseIdleConnections()
	assert.True(t, get().DidResume, "the new handshake's session is kept")
}

func TestOneSessionPerClient(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})
	c := connect(t, sim)
	for i := 0; i < 5; i++ {
		_, err := c.Systems(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), sim.Stats().SessionsCreated)
	c.Close()
	assert.Equal(t, int64(1), sim.Stats().SessionsDeleted, "Close logs out")
}

// TestSurvivesEveryVendorProfile runs the whole client surface against each simulated vendor's
// quirks: reads must succeed; controls succeed or say the BMC does not support them.
func TestSurvivesEveryVendorProfile(t *testing.T) {
	for _, profile := range bmcsim.Profiles() {
		t.Run(string(profile), func(t *testing.T) {
			ctx := context.Background()
			sim := startSim(t, bmcsim.Options{Profile: profile})
			c := connect(t, sim)
			_, err := c.Manager(ctx)
			require.NoError(t, err)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			require.NotEmpty(t, systems)
			for _, sys := range systems {
				assert.NotEmpty(t, sys.URI)
				inv, err := c.Inventory(ctx, sys.URI)
				require.NoError(t, err)
				assert.Positive(t, inv.CPU.Cores, "CPU cores counted by type")
				firmware, err := c.FirmwareInventory(ctx, sys.URI)
				require.NoError(t, err)
				assert.NotEmpty(t, firmware)
				settings, err := c.BIOSSettings(ctx, sys.URI)
				require.NoError(t, err)
				assert.NotNil(t, settings.Registry)
				for _, step := range []func() error{
					func() error { return c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, "") },
					func() error { return c.SetPower(ctx, sys.URI, bmc.PowerOn) },
					func() error { return c.SetPower(ctx, sys.URI, bmc.PowerOff) },
				} {
					if err := step(); err != nil {
						assert.True(t, errors.Is(err, bmc.ErrUnsupported), "only 'unsupported' is acceptable, got %v", err)
					}
				}
			}
		})
	}
}

// TestReadsTheDMTFMockup checks the client against a real Redfish tree nobody here wrote.
func TestReadsTheDMTFMockup(t *testing.T) {
	dir := mockupDir(t)
	sim, err := bmcsim.StartStatic(dir, true)
	require.NoError(t, err)
	defer sim.Close()
	c := connect(t, sim)

	raw, err := os.ReadFile(filepath.Join(dir, "Systems", "437XR1138R2", "index.json"))
	require.NoError(t, err)
	var want struct {
		UUID, Manufacturer, Model, SerialNumber, PowerState string
	}
	require.NoError(t, json.Unmarshal(raw, &want))

	systems, err := c.Systems(context.Background())
	require.NoError(t, err)
	require.Len(t, systems, 1)
	got := systems[0]
	assert.Equal(t, strings.ToLower(want.UUID), got.UUID)
	assert.Equal(t, "38947555-7742-3448-3784-823347823834", got.UUID)
	assert.Equal(t, want.Manufacturer, got.Manufacturer)
	assert.Equal(t, want.Model, got.Model)
	assert.Equal(t, want.SerialNumber, got.SerialNumber)
	assert.Equal(t, m.PowerState(want.PowerState), got.PowerState)

	inv, err := c.Inventory(context.Background(), got.URI)
	require.NoError(t, err)
	assert.Positive(t, inv.CPU.Sockets)
	assert.NotNil(t, inv.Memory.Total)
}

func mockupDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("IRONFLEET_MOCKUPS")
	if base == "" {
		root, err := testenv.RepoRoot()
		require.NoError(t, err)
		base = filepath.Join(root, "..", "shared", "redfish-mockups")
	}
	dir := filepath.Join(base, "public-rackmount1")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("DMTF mockup not found at %s (set IRONFLEET_MOCKUPS to the redfish-mockups directory to run this check)", dir)
	}
	return dir
}

// testSystem is a simulated system with the identity fields the tests compare filled in.
func testSystem(i int) bmcsim.SystemSpec {
	s := bmcsim.DefaultSystem(i)
	s.Manufacturer, s.Model, s.BIOSVersion = "Contoso", fmt.Sprintf("R-%d", 1000+i), "2.1."+fmt.Sprint(i)
	return s
}
