package bmc

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func TestParseAddress(t *testing.T) {
	cases := map[string]Address{
		"redfish+https://10.0.0.5/redfish/v1":                           {Type: "redfish+https", Endpoint: "https://10.0.0.5"},
		"redfish+http://127.0.0.1:8000/redfish/v1":                      {Type: "redfish+http", Endpoint: "http://127.0.0.1:8000"},
		"redfish://bmc.example.com/redfish/v1/Systems/1":                {Type: "redfish", Endpoint: "https://bmc.example.com", SystemPath: "/redfish/v1/Systems/1"},
		"idrac-redfish://10.0.0.7/redfish/v1/Systems/System.Embedded.1": {Type: "idrac-redfish", Endpoint: "https://10.0.0.7", SystemPath: "/redfish/v1/Systems/System.Embedded.1"},
		"ilo5-redfish://[fd00::5]:8443/redfish/v1":                      {Type: "ilo5-redfish", Endpoint: "https://[fd00::5]:8443"},
		"ipmi://10.0.0.6:623":                                           {Type: "ipmi", Endpoint: "ipmi://10.0.0.6:623"},
		"ipmi://10.0.0.6":                                               {Type: "ipmi", Endpoint: "ipmi://10.0.0.6:623"},
		"ipmi://bmc-7.example.com:9623?privilegelevel=OPERATOR":         {Type: "ipmi", Endpoint: "ipmi://bmc-7.example.com:9623", PrivilegeLevel: "OPERATOR"},
		"ipmi://10.0.0.6?privilegelevel=administrator":                  {Type: "ipmi", Endpoint: "ipmi://10.0.0.6:623"},
		"ipmi://[fd00::6]:6230":                                         {Type: "ipmi", Endpoint: "ipmi://[fd00::6]:6230"},
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			got, err := ParseAddress(in)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestUnsupportedSchemes(t *testing.T) {
	for _, in := range []string{"libvirt://10.0.0.6:623", "ilo4://10.0.0.8", "irmc://10.0.0.9", "gopher://10.0.0.10", "10.0.0.11"} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseAddress(in)
			require.Error(t, err)
			assert.Equal(t, metalv1alpha1.BMCReasonUnsupportedProtocol, Reason(err), err.Error())
		})
	}
}

func TestMalformedIPMIAddress(t *testing.T) {
	for _, in := range []string{"ipmi://10.0.0.6:0", "ipmi://10.0.0.6:99999", "ipmi://:623", "ipmi://10.0.0.6?privilegelevel=ROOT"} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseAddress(in)
			require.Error(t, err)
			assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, Reason(err), err.Error())
		})
	}
}

func TestMalformedAddress(t *testing.T) {
	_, err := ParseAddress("redfish://bad host/")
	require.Error(t, err)
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, Reason(err))
	_, err = ParseAddress("")
	require.Error(t, err)
}

// FuzzParseAddress: any string gives an address or a classified error, never a panic; what it
// accepts is an http(s) endpoint with a host, or an ipmi:// one with a host and a port.
func FuzzParseAddress(f *testing.F) {
	for _, seed := range []string{"redfish+https://10.0.0.5/redfish/v1", "ipmi://10.0.0.6:623", "idrac-redfish://[fd00::1]:8443/redfish/v1/Systems/1", "", "::", "redfish://%zz"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		addr, err := ParseAddress(in)
		if err != nil {
			switch Reason(err) {
			case metalv1alpha1.BMCReasonUnsupportedProtocol, metalv1alpha1.BMCReasonProtocolError:
			default:
				t.Fatalf("unclassified error for %q: %v", in, err)
			}
			return
		}
		if addr.Type == ProtocolIPMI {
			if u, err := url.Parse(addr.Endpoint); err != nil || u.Scheme != "ipmi" || u.Hostname() == "" || u.Port() == "" {
				t.Fatalf("%q gave IPMI endpoint %q (%v)", in, addr.Endpoint, err)
			}
			return
		}
		if !strings.HasPrefix(addr.Endpoint, "http://") && !strings.HasPrefix(addr.Endpoint, "https://") {
			t.Fatalf("%q gave endpoint %q", in, addr.Endpoint)
		}
	})
}
