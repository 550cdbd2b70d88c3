package bmcsim_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// fleetOptions gives BMC i two distinct systems and cycles through the profiles.
func fleetOptions(i int) bmcsim.Options {
	return bmcsim.Options{
		Username: testUser, Password: testPass, TLS: i%4 == 0,
		Profile: bmcsim.Profiles()[i%len(bmcsim.Profiles())],
		Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(2 * i), bmcsim.DefaultSystem(2*i + 1)},
	}
}

func TestFleetOfManyBMCsIsCheapAndIndependent(t *testing.T) {
	const n = 200
	before := runtime.NumGoroutine()
	fleet, err := bmcsim.StartFleet(n, fleetOptions)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, b := range fleet {
			require.NoError(t, b.Close())
		}
	})
	// One accept goroutine per BMC, none per system.
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, n+10)

	hosts := map[string]bool{}
	for _, b := range fleet {
		assert.False(t, hosts[b.Host()], "each BMC has its own port")
		hosts[b.Host()] = true
	}

	// Power on the first system of every BMC from 8 workers at once.
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				b := fleet[i]
				id := memberIDs(t, getOK(t, b, "/redfish/v1/Systems"))[0]
				status, _, body := call(t, b, http.MethodPost, strings.TrimSuffix(id, "/")+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
				assert.Equal(t, http.StatusNoContent, status, "BMC %d: %v", i, body)
			}
		})
	}
	for i := range fleet {
		work <- i
	}
	close(work)
	wg.Wait()

	uuids := map[string]bool{}
	for i, b := range fleet {
		assert.EqualValues(t, 1, b.Stats().Resets, "BMC %d", i)
		ids := []string{"1", "System.Embedded.1", "system"}
		var log []bmcsim.PowerOnEvent
		for _, id := range ids {
			if l := b.BootLog(id); l != nil {
				log = l
			}
		}
		require.Len(t, log, 1, "BMC %d", i)
		assert.Equal(t, bmcsim.DefaultSystem(2*i).UUID, log[0].UUID)
		assert.False(t, uuids[log[0].UUID])
		uuids[log[0].UUID] = true
	}
}

func TestOneBMCUnderConcurrentClients(t *testing.T) {
	b := start(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(1)}})
	var powerOns atomic.Int64
	b.OnPowerOn(func(bmcsim.PowerOnEvent) { powerOns.Add(1) })

	const workers, rounds = 16, 20
	var resets atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			sys := fmt.Sprint(w%2 + 1)
			path := "/redfish/v1/Systems/" + sys
			for r := range rounds {
				switch r % 5 {
				case 0:
					getOK(t, b, path)
				case 1:
					status, _, _ := call(t, b, http.MethodPatch, path, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}})
					assert.Equal(t, http.StatusNoContent, status)
				case 2:
					status, _, _ := call(t, b, http.MethodPost, path+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": []string{"On", "ForceOff"}[w%2]})
					assert.Equal(t, http.StatusNoContent, status)
					resets.Add(1)
				case 3:
					b.SetPowerState(sys, "Off")
					_ = b.BootLog(sys)
					_, _ = b.BootOverride(sys)
				case 4:
					status, hdr, _ := call(t, b, http.MethodPost, "/redfish/v1/SessionService/Sessions", map[string]string{"UserName": testUser, "Password": testPass})
					if !assert.Equal(t, http.StatusCreated, status) {
						continue
					}
					status, _, _ = call(t, b, http.MethodDelete, hdr.Get("Location"), nil, "Authorization", "", "X-Auth-Token", hdr.Get("X-Auth-Token"))
					assert.Equal(t, http.StatusNoContent, status)
					_ = b.Stats()
				}
			}
		})
	}
	wg.Wait()

	st := b.Stats()
	assert.Equal(t, resets.Load(), st.Resets)
	assert.EqualValues(t, workers*rounds/5, st.BootPatches)
	assert.EqualValues(t, workers*rounds/5, st.SessionsCreated)
	assert.Equal(t, st.SessionsCreated, st.SessionsDeleted)
	assert.Zero(t, st.ActiveSessions)
	assert.EqualValues(t, workers*rounds/5*(1+1+1+2), st.Requests)
	assert.EqualValues(t, len(b.BootLog("1"))+len(b.BootLog("2")), powerOns.Load(), "every logged power-on reached the hook")
}

func BenchmarkGetSystem(b *testing.B) {
	bmc, err := bmcsim.Start(bmcsim.Options{Username: testUser, Password: testPass, Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(1)}})
	require.NoError(b, err)
	defer bmc.Close()
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodGet, bmc.URL()+"/redfish/v1/Systems/1", nil)
		req.SetBasicAuth(testUser, testPass)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained, so the connection is reused
		_ = resp.Body.Close()
	}
}

func BenchmarkStartTLSBMC(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bmc, err := bmcsim.Start(fleetOptions(4 * i))
		if err != nil {
			b.Fatal(err)
		}
		_ = bmc.Close()
	}
}
