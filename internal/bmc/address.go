package bmc

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	hwbmc "github.com/metal3-io/baremetal-operator/pkg/hardwareutils/bmc"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Address is a parsed BMC address.
type Address struct {
	// Type is the address's scheme as hardwareutils names it (redfish, idrac-redfish, ipmi, …).
	Type string
	// Endpoint is the Redfish service's base URL (scheme://host[:port]), or for IPMI
	// "ipmi://host:port" (the port always present, 623 by default; IPv6 in brackets).
	Endpoint string
	// SystemPath restricts the BMC to one system when the address names one
	// (…/redfish/v1/Systems/1); empty means every system the BMC exposes.
	SystemPath string
	// PrivilegeLevel is the IPMI session privilege an ipmi:// address asks for
	// (?privilegelevel=): ADMINISTRATOR (the default), OPERATOR or USER.
	PrivilegeLevel string
}

// ProtocolIPMI is the Type of an IPMI address (ipmi://host[:port]).
const ProtocolIPMI = "ipmi"

// ParseAddress parses a BMC URL with hardwareutils/bmc. Redfish types (redfish://, …) and
// ipmi:// are driven; schemes that parse but that Ironfleet does not drive (libvirt, ilo4,
// irmc, …) and schemes nobody knows both give an error with reason UnsupportedProtocol;
// malformed addresses give ProtocolError.
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
	if !strings.Contains(address, "://") {
		return Address{}, Errorf(metalv1alpha1.BMCReasonUnsupportedProtocol, "BMC address %q has no scheme: say ipmi:// or redfish+https:// (or another Redfish scheme)", address)
	}
	// hardwareutils reads an address without a scheme as IPMI, as Metal3 does; Ironfleet wants
	// the scheme said (the CRD requires one too).
	if access.Driver() == "ipmi" && access.Type() == ProtocolIPMI && strings.HasPrefix(strings.ToLower(address), ProtocolIPMI+"://") {
		return ipmiAddress(address, info)
	}
	endpoint, isRedfish := info["redfish_address"].(string)
	if !isRedfish {
		return Address{}, Errorf(metalv1alpha1.BMCReasonUnsupportedProtocol,
			"BMC type %q (driver %s) is not supported yet: Ironfleet drives Redfish BMCs (redfish://, redfish+https://, idrac-redfish://, ilo5-redfish://) and IPMI BMCs (ipmi://)",
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

// ipmiAddress is an ipmi:// address as hardwareutils read it: its host, its port (623 when the
// address names none) and the session privilege it asks for (?privilegelevel=, as Metal3's:
// ADMINISTRATOR by default; OPERATOR is enough for power and boot, for a user limited to it).
func ipmiAddress(address string, info map[string]any) (Address, error) {
	level, _ := info["ipmi_priv_level"].(string)
	level = strings.ToUpper(level)
	switch level {
	case "", "ADMINISTRATOR":
		level = ""
	case "OPERATOR", "USER":
	default:
		return Address{}, Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid BMC address %q: privilegelevel %q is not ADMINISTRATOR, OPERATOR or USER", address, level)
	}
	host, _ := info["ipmi_address"].(string)
	port, _ := info["ipmi_port"].(string)
	if host == "" || strings.ContainsAny(host, "/@ ") {
		return Address{}, Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid BMC address %q: no host", address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Address{}, Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid BMC address %q: port %q is not 1-65535", address, port)
	}
	return Address{Type: ProtocolIPMI, Endpoint: ProtocolIPMI + "://" + net.JoinHostPort(host, port), PrivilegeLevel: level}, nil
}

// Protocol is the protocol the address is driven with: IPMI for ipmi://, else Redfish.
func (a Address) Protocol() metalv1alpha1.BMCProtocol {
	if a.Type == ProtocolIPMI {
		return metalv1alpha1.BMCProtocolIPMI
	}
	return metalv1alpha1.BMCProtocolRedfish
}

// String is the endpoint and, when set, the system path or the IPMI privilege level asked
// for.
func (a Address) String() string {
	if a.PrivilegeLevel != "" {
		return a.Endpoint + "?privilegelevel=" + a.PrivilegeLevel
	}
	return fmt.Sprintf("%s%s", a.Endpoint, a.SystemPath)
}
