package bmc

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// TestByProtocolSendsEachAddressToItsProtocol: ipmi:// addresses reach the IPMI connector,
// every Redfish scheme the Redfish one, and the BMC status names the protocol.
func TestByProtocolSendsEachAddressToItsProtocol(t *testing.T) {
	var got []string
	connector := func(name string) Connector {
		return func(context.Context, Target) (Client, error) {
			got = append(got, name)
			return nil, errors.New(name)
		}
	}
	connect := ByProtocol(connector("redfish"), connector("ipmi"))
	for in, want := range map[string]metalv1alpha1.BMCProtocol{
		"ipmi://10.0.0.6:623":                 metalv1alpha1.BMCProtocolIPMI,
		"redfish+https://10.0.0.5/redfish/v1": metalv1alpha1.BMCProtocolRedfish,
		"idrac-redfish://10.0.0.7":            metalv1alpha1.BMCProtocolRedfish,
	} {
		got = nil
		addr, err := ParseAddress(in)
		require.NoError(t, err)
		assert.Equal(t, want, addr.Protocol(), in)
		_, err = connect(context.Background(), Target{Address: addr})
		require.Error(t, err)
		assert.Equal(t, []string{map[metalv1alpha1.BMCProtocol]string{metalv1alpha1.BMCProtocolIPMI: "ipmi", metalv1alpha1.BMCProtocolRedfish: "redfish"}[want]}, got, in)
	}
}
