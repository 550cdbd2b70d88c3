package ipmi

import (
	"context"
	"fmt"
	"strings"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Systems reports the BMC's one system: UUID from Get System GUID ("" when the BMC lacks the
// command), manufacturer, model and serial number from FRU device 0, and the power state.
func (c *Client) Systems(ctx context.Context) ([]bmc.SystemInfo, error) {
	info := bmc.SystemInfo{URI: SystemURI, ID: "system"}
	err := c.do(ctx, "read system", func(ctx context.Context, ic *client.Client) error {
		var err error
		if info.UUID, err = systemGUID(ctx, ic); err != nil {
			return err
		}
		fru, err := c.readFRU(ctx, ic)
		if err != nil {
			return err
		}
		info.Manufacturer, info.Model, info.SerialNumber = fru.Identity()
		info.PowerState, err = powerState(ctx, ic)
		return err
	})
	if err != nil {
		return nil, err
	}
	return []bmc.SystemInfo{info}, nil
}

func systemGUID(ctx context.Context, ic *client.Client) (string, error) {
	b, err := raw(ctx, ic, types.CommandGetSystemGUID)
	if isCC(err) {
		return "", nil // no System GUID on this BMC: the controller names the server otherwise
	}
	if err != nil {
		return "", err
	}
	return DecodeSystemGUID(b)
}

// readFRU reads and parses FRU device 0 once per client. A BMC without FRU data (a completion
// code meaning "not present", an empty area, no common header), or with data too broken to
// parse, gives an empty FRU, kept: identity fields stay empty, nothing fails. Any other failure
// (a busy or confused BMC) gives an empty FRU this time only; the next call reads again. No
// answer fails the call, as any other command would.
func (c *Client) readFRU(ctx context.Context, ic *client.Client) (FRU, error) {
	if c.fru != nil {
		return *c.fru, nil
	}
	data, err := readFRUData(ctx, ic)
	switch {
	case err == nil:
	case isNoResponse(err):
		return FRU{}, err
	case noFRU(err):
		c.fru = &FRU{}
		return FRU{}, nil
	default:
		return FRU{}, nil
	}
	fru, _ := ParseFRU(data) // keeps whatever parsed; ErrNoFRU leaves it empty
	c.fru = &fru
	return fru, nil
}

// noFRU reports whether a GetFRUData error says FRU device 0 does not exist or is empty:
// completion codes "not present", "invalid command" or "invalid data field" (not 0xC3, a
// processing timeout, nor 0x81, "FRU device busy": those are read again).
func noFRU(err error) bool {
	if re, ok := types.IsResponseError(err); ok {
		switch uint8(re.CompletionCode()) {
		case ccNotPresent, ccInvalidCommand, ccInvalidDataField:
			return true
		}
		return false
	}
	return strings.Contains(err.Error(), "invalid FRU size") // an area of 0 bytes
}

// Inventory is not offered: IPMI reads FRU only, and the probe reports the hardware.
func (c *Client) Inventory(_ context.Context, systemURI string) (metalv1alpha1.Inventory, error) {
	if err := checkSystem(systemURI); err != nil {
		return metalv1alpha1.Inventory{}, err
	}
	return metalv1alpha1.Inventory{}, unsupported("IPMI offers FRU only (manufacturer, product, serial): the probe's in-band inventory fills the rest")
}

// FirmwareInventory is not offered: IPMI has no firmware inventory (Get Device ID gives the
// BMC's own firmware revision only, which Manager reports).
func (c *Client) FirmwareInventory(_ context.Context, systemURI string) ([]bmc.FirmwareComponent, error) {
	if err := checkSystem(systemURI); err != nil {
		return nil, err
	}
	return nil, unsupported("IPMI has no firmware inventory")
}

// BIOSSettings is not offered: IPMI has no BIOS settings.
func (c *Client) BIOSSettings(_ context.Context, systemURI string) (bmc.Settings, error) {
	if err := checkSystem(systemURI); err != nil {
		return bmc.Settings{}, err
	}
	return bmc.Settings{}, unsupported("IPMI has no BIOS settings")
}

// ManagerSettings is not offered: IPMI has no settings registry of its BMC.
func (c *Client) ManagerSettings(_ context.Context, systemURI string) (bmc.Settings, error) {
	if err := checkSystem(systemURI); err != nil {
		return bmc.Settings{}, err
	}
	return bmc.Settings{}, unsupported("IPMI has no BMC settings registry")
}

// VirtualMedia is not offered: IPMI has no virtual media.
func (c *Client) VirtualMedia(_ context.Context, _ string) (bmc.MediaSlot, error) {
	return bmc.MediaSlot{}, noVirtualMedia()
}

// InsertMedia is not offered: IPMI has no virtual media.
func (c *Client) InsertMedia(_ context.Context, _, _ string) error { return noVirtualMedia() }

// EjectMedia is not offered: IPMI has no virtual media.
func (c *Client) EjectMedia(_ context.Context, _ string) error { return noVirtualMedia() }

func noVirtualMedia() error {
	return bmc.Classify(metalv1alpha1.BMCReasonVirtualMediaUnsupported,
		fmt.Errorf("IPMI has no virtual media: %w", bmc.ErrUnsupported))
}

// Manager reports the BMC from Get Device ID: manufacturer by IANA number, product ID as model,
// firmware "major.minor". A BMC that answers is powered on.
func (c *Client) Manager(ctx context.Context) (bmc.ManagerInfo, error) {
	var info bmc.ManagerInfo
	err := c.do(ctx, "read BMC identity", func(ctx context.Context, ic *client.Client) error {
		b, err := raw(ctx, ic, types.CommandGetDeviceID)
		if err != nil {
			return err
		}
		id, err := DecodeDeviceID(b)
		if err != nil {
			return err
		}
		c.manufacturer = &id.ManufacturerID
		info = bmc.ManagerInfo{
			Manufacturer:    ManufacturerName(id.ManufacturerID),
			Model:           fmt.Sprintf("0x%04x", id.ProductID),
			FirmwareVersion: id.FirmwareVersion(),
			PowerState:      metalv1alpha1.PowerStateOn,
		}
		return nil
	})
	if err != nil {
		return info, err
	}
	// The MAC is extra: a BMC that does not say it (no LAN channel found, a refusal) still
	// has an identity.
	if mac, macErr := c.MACAddress(ctx); macErr == nil {
		info.MACAddress = mac
	}
	return info, nil
}

// manufacturers names the IANA enterprise numbers of common BMC vendors.
var manufacturers = map[uint32]string{
	2:     "IBM",
	11:    "Hewlett Packard Enterprise",
	343:   "Intel",
	674:   "Dell",
	2011:  "Huawei",
	4753:  "MontaVista (OpenIPMI)",
	7244:  "Quanta",
	10368: "Fujitsu",
	10876: "Supermicro",
	19046: "Lenovo",
	20974: "American Megatrends",
}

// ManufacturerName is the vendor with IANA enterprise number n, or "IANA n".
func ManufacturerName(n uint32) string {
	if name, ok := manufacturers[n]; ok {
		return name
	}
	return fmt.Sprintf("IANA %d", n)
}

// maxChannel is the last channel number Get Channel Info is asked about (12-15 are reserved
// or the current/system interface).
const maxChannel = 11

// MACAddress reads the BMC's own LAN MAC address (LAN configuration parameter 5) on its 802.3
// LAN channel, found with Get Channel Info (channel 1 when none says LAN). "" when the BMC
// reports no MAC (all zeros) or does not say. The MAC is optional, so it is read once per
// client, whatever the outcome, and a request the BMC leaves unanswered here ends the lookup
// with "" instead of tearing the session down as other commands do.
func (c *Client) MACAddress(ctx context.Context) (string, error) {
	var mac string
	err := c.do(ctx, "read BMC MAC address", func(ctx context.Context, ic *client.Client) error {
		if c.mac == nil {
			found := lanMAC(ctx, ic)
			c.mac = &found
		}
		mac = *c.mac
		return nil
	})
	return mac, err
}

// lanMAC finds the LAN channel and reads its MAC; "" on any failure.
func lanMAC(ctx context.Context, ic *client.Client) string {
	ch, ok := lanChannelNumber(ctx, ic)
	if !ok {
		return ""
	}
	b, err := raw(ctx, ic, types.CommandGetLanConfigParam, ch, 0x05, 0, 0)
	if err != nil {
		return ""
	}
	mac, err := DecodeLANMAC(b)
	if err != nil {
		return ""
	}
	return mac
}

// lanChannelNumber is the first channel Get Channel Info calls 802.3 LAN, 1 when none does;
// not ok when a request went unanswered (probing on would cost a timeout per channel).
func lanChannelNumber(ctx context.Context, ic *client.Client) (uint8, bool) {
	for ch := uint8(1); ch <= maxChannel; ch++ {
		b, err := raw(ctx, ic, types.CommandGetChannelInfo, ch)
		if isCC(err) {
			continue
		}
		if err != nil {
			return 0, false
		}
		if lan, _ := DecodeChannelIsLAN(b); lan {
			return ch, true
		}
	}
	return 1, true
}
