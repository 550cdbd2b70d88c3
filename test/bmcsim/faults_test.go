package bmcsim_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// rawGet makes one authenticated request and returns the status or the transport error.
func rawGet(b *bmcsim.BMC, client *http.Client, path string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, b.URL()+path, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(testUser, testPass)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestErrorRateAnswers5xx(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	b.SetFaults(bmcsim.Faults{ErrorRate: 1})
	seen := map[int]bool{}
	for range 20 {
		status, err := rawGet(b, httpClient(t, b), "/redfish/v1/Systems")
		require.NoError(t, err)
		seen[status] = true
	}
	assert.Equal(t, map[int]bool{500: true, 503: true}, seen, "both 500 and 503 occur")

	_, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: testPass, HTTPClient: httpClient(t, b)})
	require.Error(t, err)
	assert.GreaterOrEqual(t, statusOf(err), 500)
	assert.EqualValues(t, 21, b.Stats().Requests, "faulted requests are counted")

	b.SetFaults(bmcsim.Faults{})
	status, err := rawGet(b, httpClient(t, b), "/redfish/v1/Systems")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status, "the zero Faults turns injection off")
}

func TestDropRateClosesTheConnection(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	b.SetFaults(bmcsim.Faults{DropRate: 1})
	_, err := rawGet(b, httpClient(t, b), "/redfish/v1/")
	require.Error(t, err)
	assert.ErrorContains(t, err, "EOF")

	_, err = gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: testUser, Password: testPass, HTTPClient: httpClient(t, b)})
	require.Error(t, err)
	assert.Zero(t, statusOf(err), "no HTTP answer at all: %v", err)
}

func TestTimeoutRateHangsUntilTheClientGivesUp(t *testing.T) {
	b := start(t, bmcsim.Options{})
	b.SetFaults(bmcsim.Faults{TimeoutRate: 1})
	client := &http.Client{Timeout: 200 * time.Millisecond}
	began := time.Now()
	_, err := rawGet(b, client, "/redfish/v1/")
	require.Error(t, err)
	var netErr interface{ Timeout() bool }
	require.True(t, errors.As(err, &netErr) && netErr.Timeout(), "a client timeout, got %v", err)
	assert.GreaterOrEqual(t, time.Since(began), 200*time.Millisecond)

	// A client that never gives up is released when the BMC closes.
	done := make(chan error, 1)
	go func() {
		_, err := rawGet(b, &http.Client{}, "/redfish/v1/")
		done <- err
	}()
	eventually(t, func() bool { return b.Stats().Requests == 2 }, "the second request arrives")
	require.NoError(t, b.Close())
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the hanging request")
	}
}

func TestUnauthorizedRateRefusesGoodCredentials(t *testing.T) {
	b := start(t, bmcsim.Options{})
	b.SetFaults(bmcsim.Faults{UnauthorizedRate: 1})
	status, err := rawGet(b, httpClient(t, b), "/redfish/v1/Systems")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Zero(t, b.Stats().AuthFailures, "injected refusals are not credential failures")
}

func TestLatencyIsAddedToEveryAnswer(t *testing.T) {
	const latency = 150 * time.Millisecond
	b := start(t, bmcsim.Options{TLS: true})
	b.SetFaults(bmcsim.Faults{Latency: latency})
	c := connect(t, b, true)
	began := time.Now()
	_, err := c.Service.Systems() // the collection and its one member: two requests in a row
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(began), 2*latency)
}

func TestFaultsAreReproducibleFromTheSeed(t *testing.T) {
	sequence := func() []int {
		b := start(t, bmcsim.Options{})
		b.SetFaults(bmcsim.Faults{ErrorRate: 0.5, Seed: 42})
		var out []int
		for range 40 {
			status, err := rawGet(b, httpClient(t, b), "/redfish/v1/")
			require.NoError(t, err)
			out = append(out, status)
		}
		return out
	}
	first := sequence()
	assert.Equal(t, first, sequence())
	assert.Contains(t, first, http.StatusOK)
	assert.NotEqual(t, 40, countOf(first, http.StatusOK), "about half fail")
}

func countOf(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
