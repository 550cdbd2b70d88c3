package post

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func octets(body []byte) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	}
}

func TestUserDataRetriesTheRegistrysFailuresThenReadsTheBytes(t *testing.T) {
	want := []byte("#cloud-config\n\x00\xff")
	reg, srv := newRegistry(t,
		status(http.StatusServiceUnavailable, `{"error":"reading the claim: timeout"}`),
		dropConnection,
		octets(want),
	)
	got, err := UserData(context.Background(), srv.Client(), srv.URL+"/", secretToken, "4c4c4544-0042-3510-8052-b7c04f564433", fast)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.Equal(t, 3, reg.count())
	for i, req := range reg.requests {
		assert.Equal(t, http.MethodPost, req.Method)
		assert.Equal(t, "/v1/userdata", req.URL.Path)
		assert.Equal(t, "Bearer "+secretToken, req.Header.Get("Authorization"))
		var body map[string]string
		require.NoError(t, json.Unmarshal(reg.bodies[i], &body))
		assert.Equal(t, map[string]string{"systemUUID": "4c4c4544-0042-3510-8052-b7c04f564433"}, body)
	}
}

func TestUserDataNoneIsEmpty(t *testing.T) {
	_, srv := newRegistry(t, status(http.StatusNoContent, ``))
	got, err := UserData(context.Background(), srv.Client(), srv.URL, secretToken, "", fast)
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
}

func TestUserDataRefusalsAndOversizeAreNotRetried(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusForbidden, `{"error":"the token is not for an install boot of server s-1 (`+secretToken+`)"}`))
	_, err := UserData(context.Background(), srv.Client(), srv.URL, secretToken, "", fast)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusForbidden, se.Code)
	assert.NotContains(t, err.Error(), secretToken)
	assert.Equal(t, 1, reg.count())

	reg, srv = newRegistry(t, func(w http.ResponseWriter) {
		_, _ = io.CopyN(w, zeros{}, metalv1alpha1.MaxUserDataBytes+1)
	})
	_, err = UserData(context.Background(), srv.Client(), srv.URL, secretToken, "", fast)
	assert.ErrorContains(t, err, "larger than 262144 bytes")
	assert.Equal(t, 1, reg.count())
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
