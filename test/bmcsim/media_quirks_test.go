package bmcsim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// cdSlot reads the generic profile's CD slot through gofish.
func cdSlot(t *testing.T, c *gofish.APIClient) *redfish.VirtualMedia {
	t.Helper()
	vm, err := redfish.GetVirtualMedia(c, cdPath)
	require.NoError(t, err)
	return vm
}

// mediaQuirkCases are the VirtualMedia quirks' entries of quirkCases.
var mediaQuirkCases = map[string]quirkCase{
	"NoVirtualMedia": {
		quirks: bmcsim.Quirks{NoVirtualMedia: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Systems/1"), "VirtualMedia")
			assert.NotContains(t, getOK(t, b, "/redfish/v1/Managers/BMC"), "VirtualMedia")
			status, _, _ := call(t, b, http.MethodGet, "/redfish/v1/Systems/1/VirtualMedia", nil)
			assert.Equal(t, http.StatusNotFound, status)
			status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": "http://127.0.0.1:1/x.iso"})
			assert.Equal(t, http.StatusNotFound, status)
			assert.Equal(t, bmcsim.MediaEvent{SystemID: "1"}, b.Media("1"))
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			s := walk(t, c).Systems[0].System
			vms, err := s.VirtualMedia()
			require.NoError(t, err)
			assert.Empty(t, vms)
			mgrs, err := s.ManagedBy()
			require.NoError(t, err)
			vms, err = mgrs[0].VirtualMedia()
			require.NoError(t, err)
			assert.Empty(t, vms)
		},
	},
	"VirtualMediaPatchOnly": {
		quirks: bmcsim.Quirks{VirtualMediaPatchOnly: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			status, header, slot := call(t, b, http.MethodGet, cdPath, nil)
			require.Equal(t, http.StatusOK, status)
			assert.NotContains(t, slot, "Actions")
			assert.Contains(t, header.Get("Allow"), "PATCH")
			status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			assert.Equal(t, http.StatusNotFound, status, "no action")

			insert := map[string]any{"Image": im.url("a"), "Inserted": true, "WriteProtected": true}
			status, _, _ = call(t, b, http.MethodPatch, cdPath, insert, "If-Match", `W/"stale"`)
			assert.Equal(t, http.StatusPreconditionFailed, status)
			status, _, body := call(t, b, http.MethodPatch, cdPath, insert, "If-Match", header.Get("ETag"))
			require.Equal(t, http.StatusNoContent, status, "%v", body)
			assert.True(t, b.Media("1").Inserted)
			assert.Equal(t, true, getOK(t, b, cdPath)["Inserted"])

			status, _, _ = call(t, b, http.MethodPatch, cdPath, map[string]any{"Image": nil, "Inserted": false})
			require.Equal(t, http.StatusNoContent, status)
			assert.False(t, b.Media("1").Inserted)
			assert.EqualValues(t, 1, b.Stats().MediaInserts)
			assert.EqualValues(t, 1, b.Stats().MediaEjects)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			vm := cdSlot(t, c)
			assert.False(t, vm.SupportsMediaInsert)
			assert.Error(t, vm.InsertMedia("http://127.0.0.1:1/x.iso", true, true), "gofish v0.20 has no PATCH fallback")
		},
	},
	"VirtualMediaRejectsInsertParams": {
		quirks: bmcsim.Quirks{VirtualMediaRejectsInsertParams: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			for _, param := range []string{"Inserted", "WriteProtected"} {
				status, _, body := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a"), param: true})
				assert.Equal(t, http.StatusBadRequest, status)
				assert.Equal(t, "Base.1.8.ActionParameterNotSupported", messageID(body))
			}
			status, _, _ := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			require.Equal(t, http.StatusNoContent, status)
			assert.True(t, b.Media("1").Inserted)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			im := imageServer(t)
			vm := cdSlot(t, c)
			assert.Equal(t, http.StatusBadRequest, statusOf(vm.InsertMedia(im.url("b"), true, true)), "gofish's InsertMedia always sends both")
			require.NoError(t, vm.InsertMediaConfig(redfish.VirtualMediaConfig{Image: im.url("b")}))
			assert.Equal(t, im.url("b"), b.Media("1").Image)
		},
	},
	"VirtualMediaInsertedLag": {
		quirks: bmcsim.Quirks{VirtualMediaInsertedLag: time.Hour},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			status, _, _ := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			require.Equal(t, http.StatusNoContent, status)
			assert.True(t, b.Media("1").Inserted, "the media is in")
			slot := getOK(t, b, cdPath)
			assert.Equal(t, false, slot["Inserted"], "the BMC has not noticed yet")
			assert.Equal(t, im.url("a"), slot["Image"])

			status, _, _ = call(t, b, http.MethodPost, ejectCD, nil)
			require.Equal(t, http.StatusNoContent, status)
			assert.False(t, b.Media("1").Inserted, "the media is out")
			assert.Equal(t, true, getOK(t, b, cdPath)["Inserted"], "and the BMC still says in")
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			im := imageServer(t)
			vm := cdSlot(t, c)
			require.NoError(t, vm.InsertMediaConfig(redfish.VirtualMediaConfig{Image: im.url("b")}))
			assert.False(t, cdSlot(t, c).Inserted)
		},
	},
	"VirtualMediaConflictWhenInserted": {
		quirks: bmcsim.Quirks{VirtualMediaConflictWhenInserted: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			status, _, _ := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			require.Equal(t, http.StatusNoContent, status)
			status, _, body := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("b")})
			assert.Equal(t, http.StatusConflict, status)
			assert.Equal(t, "Base.1.8.ResourceInUse", messageID(body))
			assert.Equal(t, im.url("a"), b.Media("1").Image)
			status, _, _ = call(t, b, http.MethodPost, ejectCD, map[string]any{})
			require.Equal(t, http.StatusNoContent, status)
			status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("b")})
			require.Equal(t, http.StatusNoContent, status, "after an eject it takes another")
			assert.Equal(t, im.url("b"), b.Media("1").Image)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			im := imageServer(t)
			vm := cdSlot(t, c)
			require.True(t, vm.Inserted, "b is in, from the wire test")
			assert.Equal(t, http.StatusConflict, statusOf(vm.InsertMedia(im.url("a"), true, true)))
			require.NoError(t, vm.EjectMedia())
			require.NoError(t, vm.InsertMedia(im.url("a"), true, true))
		},
	},
	"VirtualMediaEjectNeedsBody": {
		quirks: bmcsim.Quirks{VirtualMediaEjectNeedsBody: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			status, _, _ := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			require.Equal(t, http.StatusNoContent, status)
			status, _, body := call(t, b, http.MethodPost, ejectCD, nil)
			assert.Equal(t, http.StatusUnsupportedMediaType, status)
			assert.Equal(t, "Base.1.8.UnsupportedMediaType", messageID(body))
			assert.True(t, b.Media("1").Inserted)
			status, _, _ = call(t, b, http.MethodPost, ejectCD, map[string]any{})
			require.Equal(t, http.StatusNoContent, status)
			assert.False(t, b.Media("1").Inserted)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			im := imageServer(t)
			vm := cdSlot(t, c)
			require.NoError(t, vm.InsertMedia(im.url("a"), true, true))
			require.NoError(t, vm.EjectMedia(), "gofish sends {}")
			assert.False(t, b.Media("1").Inserted)
		},
	},
	"VirtualMediaNeedsTransferProtocol": {
		quirks: bmcsim.Quirks{VirtualMediaNeedsTransferProtocol: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			status, _, body := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, "Base.1.8.ActionParameterMissing", messageID(body))
			assert.Contains(t, strings.Join(extendedArgs(body), " "), "TransferProtocolType")
			status, _, body = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a"), "TransferProtocolType": "HTTPS"})
			assert.Equal(t, http.StatusBadRequest, status, "the protocol must be the URL's")
			assert.Equal(t, "Base.1.8.ActionParameterValueNotInList", messageID(body))
			status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a"), "TransferProtocolType": "HTTP"})
			require.Equal(t, http.StatusNoContent, status)
			assert.Equal(t, "HTTP", getOK(t, b, cdPath)["TransferProtocolType"])
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			im := imageServer(t)
			vm := cdSlot(t, c)
			assert.Equal(t, http.StatusBadRequest, statusOf(vm.InsertMedia(im.url("a"), true, true)))
			require.NoError(t, vm.InsertMediaConfig(redfish.VirtualMediaConfig{Image: im.url("a"), TransferProtocolType: redfish.HTTPTransferProtocolType}))
			assert.True(t, b.Media("1").Inserted)
		},
	},
	"VirtualMediaEjectWhenEmptyFails": {
		quirks: bmcsim.Quirks{VirtualMediaEjectWhenEmptyFails: true},
		wire: func(t *testing.T, b *bmcsim.BMC) {
			im := imageServer(t)
			status, _, _ := call(t, b, http.MethodPost, ejectCD, map[string]any{})
			assert.Equal(t, http.StatusBadRequest, status)
			status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
			require.Equal(t, http.StatusNoContent, status)
			status, _, _ = call(t, b, http.MethodPost, ejectCD, map[string]any{})
			require.Equal(t, http.StatusNoContent, status)
		},
		gofish: func(t *testing.T, b *bmcsim.BMC, c *gofish.APIClient) {
			assert.Equal(t, http.StatusBadRequest, statusOf(cdSlot(t, c).EjectMedia()))
		},
	},
}

// extendedArgs are the MessageArgs of a Redfish error body's first extended info.
func extendedArgs(body map[string]any) []string {
	e, _ := body["error"].(map[string]any)
	infos, _ := e["@Message.ExtendedInfo"].([]any)
	if len(infos) == 0 {
		return nil
	}
	raw, _ := infos[0].(map[string]any)["MessageArgs"].([]any)
	out := make([]string, len(raw))
	for i, a := range raw {
		out[i], _ = a.(string)
	}
	return out
}
