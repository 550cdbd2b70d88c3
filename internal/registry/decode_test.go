package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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
	// A host without a usable UUID: none, or the AMI placeholder, or garbage.
	f.Add([]byte(`{"inventory":{"networkInterfaces":[{"name":"eno1","macAddress":"0c:c4:7a:00:00:01"}]}}`))
	f.Add([]byte(`{"systemUUID":"03000200-0400-0500-0006-000700080009","inventory":{}}`))
	f.Add([]byte(`{"systemUUID":"Not Settable"}`))
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

// FuzzVerifyToken feeds the token check hostile bearer tokens: it must never panic, and a token
// it accepts must be exactly the one Token mints for the server and boot it names.
func FuzzVerifyToken(f *testing.F) {
	s, err := NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s.Token("38947555-7742-3448-3784-823347823834", "boot-1"))
	f.Add(s.Token("rack-4.smc-2.system.1", "0123456789abcdef"))
	f.Add("Zm9yZ2Vk.Zm9yZ2Vk")
	f.Add("...")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		server, boot, ok := s.Verify(token)
		if ok && s.Token(server, boot) != token {
			t.Fatalf("accepted %q for server %q boot %q, which mints another token", token, server, boot)
		}
	})
}

func TestTokensNameTheirServerAndBoot(t *testing.T) {
	s, err := NewSigner(bytes.Repeat([]byte("k"), 32))
	assert.NoError(t, err)
	for _, name := range []string{"38947555-7742-3448-3784-823347823834", "bmc-1-system.embedded.1", "a"} {
		server, boot, ok := s.Verify(s.Token(name, "b00t"))
		assert.True(t, ok, name)
		assert.Equal(t, name, server)
		assert.Equal(t, "b00t", boot)
	}
	_, _, ok := s.Verify(s.Token("Not_A_Name", "b00t"))
	assert.False(t, ok, "a name no Server can have is never taken")
	_, _, ok = s.Verify(s.Token("a", "B00T"))
	assert.False(t, ok, "nor a boot name the operator never makes")
	_, _, ok = s.Verify(s.Token("a", "b00t") + ".x")
	assert.False(t, ok)
	_, _, ok = s.Verify(strings.Repeat("A", 400) + ".b00t.x")
	assert.False(t, ok)
	// The server's name spelt another way (base64 decoders skip line breaks): not the token
	// minted, not taken (found by FuzzVerifyToken).
	token := s.Token("38947555-7742-3448-3784-823347823834", "b00t")
	_, _, ok = s.Verify(token[:10] + "\n" + token[10:])
	assert.False(t, ok, "a line break in the name")
	_, _, ok = s.Verify(token[:10] + "\r" + token[10:])
	assert.False(t, ok, "a carriage return in the name")
}

func TestCheckShape(t *testing.T) {
	list := func(item string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	assert.NoError(t, checkShape([]byte(`{"inventory":{"storage":`+list(`{"name":"sda"}`, 256)+`,"pciDevices":`+list(`{}`, 4096)+`}}`)), "lists at their bounds")
	assert.EqualError(t, checkShape([]byte(`{"inventory":{"pciDevices":`+list(`{}`, 4097)+`}}`)), "inventory.pciDevices lists more than 4096 items")
	assert.EqualError(t, checkShape([]byte(`{"INVENTORY":{"NetworkInterfaces":[{"ipAddresses":`+list(`"10.0.0.1"`, 65)+`}]}}`)), "INVENTORY.NetworkInterfaces[].ipAddresses lists more than 64 items")
	assert.EqualError(t, checkShape([]byte(`{"unknown":`+list(`1`, 257)+`}`)), "unknown lists more than 256 items", "a list the report has no bound for has the default one")
	assert.EqualError(t, checkShape([]byte(strings.Repeat("[", 17))), "the JSON nests deeper than 16 levels")
	assert.NoError(t, checkShape([]byte(`{"a": [1, {"b": [2]}], "c": {}} trailing`)), "what is not a report is the decoder's to refuse")
	assert.NoError(t, checkShape([]byte(`{"systemUUID": `)))
}
