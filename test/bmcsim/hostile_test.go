package bmcsim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// A huge system is a valid JSON object of exactly the size asked for, with or without its
// Content-Length; other resources are untouched.
func TestHugeSystemIsValidJSONOfItsSize(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			b := start(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0)}})
			const size = 3<<20 + 7
			b.SetFaults(bmcsim.Faults{HugeSystem: size, HugeSystemChunked: chunked})
			req, err := http.NewRequest(http.MethodGet, b.URL()+"/redfish/v1/Systems/1", nil)
			require.NoError(t, err)
			req.SetBasicAuth(testUser, testPass)
			resp, err := httpClient(t, b).Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			if chunked {
				assert.Equal(t, int64(-1), resp.ContentLength)
			} else {
				assert.Equal(t, int64(size), resp.ContentLength)
			}
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Len(t, data, size)
			var system map[string]any
			require.NoError(t, json.Unmarshal(data, &system))
			assert.Equal(t, "1", system["Id"])

			getOK(t, b, "/redfish/v1/Systems") // the collection is as it was
		})
	}
}

// Extra systems are listed after the real ones, and each answers as a ComputerSystem with a
// UUID of its own; one past them is not there.
func TestExtraSystemsAreListedAndAnswer(t *testing.T) {
	b := start(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0)}})
	b.SetFaults(bmcsim.Faults{ExtraSystems: 1000})
	ids := memberIDs(t, getOK(t, b, "/redfish/v1/Systems"))
	require.Len(t, ids, 1001)
	assert.Equal(t, "/redfish/v1/Systems/1", ids[0])
	assert.Equal(t, "/redfish/v1/Systems/x999", ids[1000])
	first, last := getOK(t, b, ids[1]), getOK(t, b, ids[1000])
	assert.Equal(t, "x999", last["Id"])
	assert.NotEqual(t, first["UUID"], last["UUID"])
	status, _, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems/x1000", nil)
	assert.Equal(t, http.StatusNotFound, status)

	b.SetFaults(bmcsim.Faults{})
	assert.Len(t, memberIDs(t, getOK(t, b, "/redfish/v1/Systems")), 1)
}
