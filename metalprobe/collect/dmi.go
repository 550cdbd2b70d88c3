package collect

import (
	"context"
	"errors"
	"strings"

	"github.com/jaypipes/ghw"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// dmi fills the SMBIOS identity from /sys/class/dmi/id (ghw: Product, Baseboard, Chassis,
// BIOS). The serial numbers and product_uuid are readable by root only on a real host; a
// probe run unprivileged reports them empty and warns about the UUID. The UUID is information
// (the registry finds the server by the token): it may be a vendor placeholder, and is reported
// as the firmware has it.
//
// ghw's chassis type (e.g. "Rack Mount Chassis") has no field in the API's DMIBoard.
func (c *collector) dmi(_ context.Context, rep *report.Report) error {
	if !c.exists("sys", "class", "dmi", "id") {
		return errors.New("no /sys/class/dmi/id")
	}
	opts := c.ghwOptions()
	dmi := &metalv1alpha1.DMI{}
	var errs []error
	if p, err := ghw.Product(opts...); err != nil {
		errs = append(errs, err)
	} else {
		dmi.System = metalv1alpha1.DMISystem{
			Manufacturer: known(p.Vendor),
			ProductName:  known(p.Name),
			Family:       known(p.Family),
			Version:      known(p.Version),
			SerialNumber: known(p.SerialNumber),
			SKU:          known(p.SKU),
			UUID:         known(p.UUID),
		}
	}
	if b, err := ghw.Baseboard(opts...); err != nil {
		errs = append(errs, err)
	} else {
		dmi.Baseboard = metalv1alpha1.DMIBoard{
			Manufacturer: known(b.Vendor),
			Product:      known(b.Product),
			Version:      known(b.Version),
			SerialNumber: known(b.SerialNumber),
			AssetTag:     known(b.AssetTag),
		}
	}
	if ch, err := ghw.Chassis(opts...); err != nil {
		errs = append(errs, err)
	} else {
		dmi.Chassis = metalv1alpha1.DMIBoard{
			Manufacturer: known(ch.Vendor),
			Version:      known(ch.Version),
			SerialNumber: known(ch.SerialNumber),
			AssetTag:     known(ch.AssetTag),
		}
	}
	if b, err := ghw.BIOS(opts...); err != nil {
		errs = append(errs, err)
	} else {
		dmi.BIOS = metalv1alpha1.DMIBIOS{
			Vendor:  known(b.Vendor),
			Version: known(b.Version),
			Date:    known(b.Date),
		}
	}
	rep.Inventory.DMI = dmi
	if dmi.System.UUID == "" {
		errs = append(errs, errors.New("system UUID unreadable (/sys/class/dmi/id/product_uuid needs root)"))
	}
	return joinLine(errs)
}

// joinLine joins errors into one, on one line, as a Warnings entry must be.
func joinLine(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
