package redfish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// connectWith connects to sim with opts on top of trusting(sim).
func connectWith(t *testing.T, sim *bmcsim.BMC, tune func(*redfish.Options)) *redfish.Client {
	t.Helper()
	opts := trusting(sim)
	tune(&opts)
	c, err := redfish.Connect(context.Background(), target(t, sim, password), opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// A system answered with 1 GiB, announced or chunked, fails every read of it at the default
// limit: a ProtocolError naming the resource and the limit, never the credentials.
func TestGigabyteResponseIsRefused(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			ctx := context.Background()
			sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
			// Time enough to read the 4 MiB on a loaded machine under the race detector: the
			// limit, not the timeout, must end the read.
			c := connectWith(t, sim, func(o *redfish.Options) { o.Timeout = time.Minute })
			sim.SetFaults(bmcsim.Faults{HugeSystem: 1 << 30, HugeSystemChunked: chunked})

			_, err := c.Systems(ctx)
			require.Error(t, err)
			assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
			assert.Contains(t, err.Error(), "/redfish/v1/Systems/1")
			assert.Contains(t, err.Error(), "over the 4 MiB limit")
			if !chunked {
				assert.Contains(t, err.Error(), "is 1 GiB", "says what the BMC announced")
			}
			assert.Empty(t, redfish.Leaks(err, password))

			_, err = c.PowerState(ctx, "/redfish/v1/Systems/1")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "over the 4 MiB limit")

			// The limit bounds the body, not the client: the BMC is read again once it behaves.
			sim.SetFaults(bmcsim.Faults{})
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			assert.Len(t, systems, 1)
		})
	}
}

// A body of exactly the limit is read; one byte more is not, announced or found by reading.
func TestResponseLimitIsExact(t *testing.T) {
	const limit = 64 << 10
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			ctx := context.Background()
			sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
			c := connectWith(t, sim, func(o *redfish.Options) { o.MaxResponseBytes = limit })

			sim.SetFaults(bmcsim.Faults{HugeSystem: limit, HugeSystemChunked: chunked})
			_, err := c.PowerState(ctx, "/redfish/v1/Systems/1")
			require.NoError(t, err, "a body at the limit")

			sim.SetFaults(bmcsim.Faults{HugeSystem: limit + 1, HugeSystemChunked: chunked})
			_, err = c.PowerState(ctx, "/redfish/v1/Systems/1")
			require.Error(t, err, "a body one byte over")
			assert.Contains(t, err.Error(), "over the 64 KiB limit")
		})
	}
}

// A BMC that lists more systems than the cap fails Systems with TooManySystems, naming the
// count and the cap, before any member is read; at the cap, every system is read.
func TestSystemsAboveTheCapAreRefusedUnread(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
	sim.SetFaults(bmcsim.Faults{ExtraSystems: 10_000})
	c := connect(t, sim)

	before := sim.Stats().Requests
	_, err := c.Systems(ctx)
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonTooManySystems, bmc.Reason(err))
	assert.Contains(t, err.Error(), fmt.Sprintf("lists 10001 systems, more than the %d a BMC may have", redfish.DefaultMaxSystems))
	assert.Equal(t, int64(1), sim.Stats().Requests-before, "the collection alone was read")

	capped := connectWith(t, sim, func(o *redfish.Options) { o.MaxSystems = 10 })
	sim.SetFaults(bmcsim.Faults{ExtraSystems: 9})
	systems, err := capped.Systems(ctx)
	require.NoError(t, err)
	assert.Len(t, systems, 10, "at the cap")
	sim.SetFaults(bmcsim.Faults{ExtraSystems: 10})
	_, err = capped.Systems(ctx)
	assert.Equal(t, m.BMCReasonTooManySystems, bmc.Reason(err))
	assert.Contains(t, err.Error(), "lists 11 systems, more than the 10")
}

// A system whose memory collection lists 2,000 modules (the real module, over and over) has
// that list skipped unread, as a list that fails is; its other hardware is read as usual.
func TestInventoryListAboveTheBoundIsSkippedUnread(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
	c := connect(t, sim)
	var moduleReads atomic.Int64
	redfish.WrapTransport(c, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			path := strings.TrimSuffix(req.URL.Path, "/")
			if strings.Contains(path, "/Memory/") {
				moduleReads.Add(1)
			}
			if req.Method != http.MethodGet || !strings.HasSuffix(path, "/Systems/1/Memory") {
				return next.RoundTrip(req)
			}
			members := make([]map[string]string, 2000)
			for i := range members {
				members[i] = map[string]string{"@odata.id": "/redfish/v1/Systems/1/Memory/DIMM1"}
			}
			body, _ := json.Marshal(map[string]any{"@odata.id": path, "Name": "Memory", "Members": members, "Members@odata.count": len(members)})
			return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
				ContentLength: int64(len(body)), Request: req}, nil
		})
	})
	inv, err := c.Inventory(ctx, "/redfish/v1/Systems/1")
	require.NoError(t, err)
	assert.Zero(t, len(inv.MemoryModules), "the list of 2,000 was skipped")
	assert.Zero(t, moduleReads.Load(), "no module was read")
	assert.NotEmpty(t, inv.Processors)
	assert.NotEmpty(t, inv.NetworkInterfaces)
}
