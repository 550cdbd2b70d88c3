package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ironfleet/ironfleet/internal/report"
)

// FuzzDecodeReport feeds the registry's body decoder hostile input: it must never panic, must
// refuse with 400 or 413, and whatever it accepts must encode back to JSON it accepts again.
func FuzzDecodeReport(f *testing.F) {
	f.Add([]byte(`{"systemUUID":"38947555-7742-3448-3784-823347823834","inventory":{"cpu":{"cores":8}}}`))
	f.Add([]byte(`{"systemUUID":"x","inventory":{"storage":[{"name":"sda","size":"1Ti"}]},"wipe":{"policy":"zero","disks":[{"name":"sda","method":"zero","succeeded":true}]}}`))
	f.Add([]byte(`{"inventory":{"memory":{"total":"not-a-quantity"}}}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rep report.Report
		status, err := decodeBody(http.MaxBytesReader(nil, body(data), MaxBodyBytes), &rep)
		if err != nil {
			if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
				t.Fatalf("refused with %d: %v", status, err)
			}
			return
		}
		again, err := json.Marshal(rep)
		if err != nil {
			t.Fatalf("accepted a report that does not encode: %v", err)
		}
		var back report.Report
		if _, err := decodeBody(body(again), &back); err != nil {
			t.Fatalf("a re-encoded accepted report is refused: %v", err)
		}
	})
}

func body(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

func TestDecodeBodyRefusals(t *testing.T) {
	var rep report.Report
	status, err := decodeBody(body([]byte(`{"systemUUID": 1}`)), &rep)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.ErrorContains(t, err, "malformed JSON")
	status, _ = decodeBody(http.MaxBytesReader(nil, body(bytes.Repeat([]byte(" "), MaxBodyBytes+1)), MaxBodyBytes), &rep)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
}
