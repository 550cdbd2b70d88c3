package bmc

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	hwbmc "github.com/metal3-io/baremetal-operator/pkg/hardwareutils/bmc"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Address is a parsed BMC address.
type Address struct {
	// Type is the address's scheme as hardwareutils names it (redfish, idrac-redfish, ipmi, …).
	Type string
	// Endpoint is the Redfish service's base URL (scheme://host[:port]).
	Endpoint string
	// SystemPath restricts the BMC to one system when the address names one
	// (…/redfish/v1/Systems/1); empty means every system the BMC exposes.
	SystemPath string
}

// ParseAddress parses a BMC URL with hardwareutils/bmc. Schemes that parse but that Ironfleet
// does not drive (ipmi, ilo4, irmc, …) and schemes nobody knows both give an error with reason
// UnsupportedProtocol; malformed addresses give ProtocolError.
func ParseAddress(address string) (Address, error) {
	access, err := hwbmc.NewAccessDetails(address, false)
	if err != nil {
		var unknown hwbmc.UnknownBMCTypeError
		if errors.As(err, &unknown) || errors.As(err, new(*hwbmc.UnknownBMCTypeError)) {
			return Address{}, Errorf(metalv1alpha1.BMCReasonUnsupportedProtocol, "unsupported BMC address scheme: %v", err)
		}
		return Address{}, Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid BMC address: %v", err)
	}
	// DriverInfo is the library's own rendering of the address; credentials are not needed to
	// read the address out of it, so none are passed. Every Redfish-based type (redfish,
	// idrac-redfish, ilo5-redfish, redfish-virtualmedia, …) renders a redfish_address.
	info := access.DriverInfo(hwbmc.Credentials{})
	endpoint, isRedfish := info["redfish_address"].(string)
	if !isRedfish {
		return Address{}, Errorf(metalv1alpha1.BMCReasonUnsupportedProtocol,
			"BMC type %q (driver %s) is not supported yet: Ironfleet drives Redfish BMCs (redfish://, redfish+https://, idrac-redfish://, ilo5-redfish://)",
			access.Type(), access.Driver())
	}
	if u, err := url.Parse(endpoint); err != nil || u.Host == "" {
		return Address{}, Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid BMC address %q: no host", address)
	}
	path, _ := info["redfish_system_id"].(string)
	path = strings.TrimSuffix(path, "/")
	if !strings.Contains(strings.ToLower(path), "/systems/") {
		path = ""
	}
	return Address{Type: access.Type(), Endpoint: strings.TrimSuffix(endpoint, "/"), SystemPath: path}, nil
}

// String is the endpoint and, when set, the system path.
func (a Address) String() string {
	return fmt.Sprintf("%s%s", a.Endpoint, a.SystemPath)
}
