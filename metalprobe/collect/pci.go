package collect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/pcidb"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// pciIDs is a PCI function's identity as its modalias encodes it (lower-case hex).
type pciIDs struct {
	address, vendor, product, class, subclass, driver string
}

// pci fills one PCIDevice per function in /sys/bus/pci/devices.
//
// ghw v0.26.0 names devices from a pci.ids it finds itself: it ignores both the chroot and a
// database passed with WithPCIDB, and fails outright when there is none. So the probe takes
// only IDs and drivers from ghw, names them from the pci.ids under its own root (none: IDs
// only, with a warning; never a download), and when ghw fails it reads the same sysfs files
// (modalias, driver) itself.
func (c *collector) pci(_ context.Context, rep *report.Report) error {
	devices, ghwErr := c.ghwPCI()
	if ghwErr != nil || len(devices) == 0 {
		var err error
		devices, err = c.sysfsPCI()
		if err != nil {
			return err
		}
	}
	if len(devices) == 0 {
		return errors.New("no PCI devices found in /sys/bus/pci/devices")
	}
	db, err := c.pciDatabase()
	if err != nil {
		c.note("pci: %v; reporting IDs without names", err)
	}
	c.pciDrivers = map[string]string{}
	for _, d := range devices {
		c.pciDrivers[d.address] = d.driver
		rep.Inventory.PCIDevices = append(rep.Inventory.PCIDevices, pciDevice(d, db))
	}
	return nil
}

func pciDevice(d pciIDs, db *pcidb.PCIDB) metalv1alpha1.PCIDevice {
	dev := metalv1alpha1.PCIDevice{
		Address:   d.address,
		VendorID:  d.vendor,
		ProductID: d.product,
		Class:     d.class,
		Subclass:  d.subclass,
		Driver:    d.driver,
	}
	if db == nil {
		return dev
	}
	if v := db.Vendors[d.vendor]; v != nil {
		dev.Vendor = v.Name
	}
	if p := db.Products[d.vendor+d.product]; p != nil {
		dev.Product = p.Name
	}
	// Class and Subclass hold the name when pci.ids has one, else the hex code.
	if cl := db.Classes[d.class]; cl != nil {
		dev.Class = cl.Name
		for _, sc := range cl.Subclasses {
			if sc.ID == d.subclass {
				dev.Subclass = sc.Name
			}
		}
	}
	return dev
}

// ghwPCI enumerates devices with ghw, which needs a pci.ids it finds by itself (see pci).
// It is skipped when the environment would let pcidb fetch one from the Internet.
func (c *collector) ghwPCI() ([]pciIDs, error) {
	if v, _ := strconv.ParseBool(os.Getenv("PCIDB_ENABLE_NETWORK_FETCH")); v {
		return nil, errors.New("ghw's pcidb could download pci.ids; reading sysfs directly")
	}
	info, err := ghw.PCI(c.ghwOptions()...)
	if err != nil {
		return nil, err
	}
	out := make([]pciIDs, 0, len(info.Devices))
	for _, d := range info.Devices {
		if d == nil || d.Vendor == nil || d.Product == nil || d.Class == nil || d.Subclass == nil {
			continue
		}
		out = append(out, pciIDs{
			address:  d.Address,
			vendor:   d.Vendor.ID,
			product:  d.Product.ID,
			class:    d.Class.ID,
			subclass: d.Subclass.ID,
			driver:   d.Driver,
		})
	}
	return out, nil
}

// modaliasPattern is pci:v<vendor>d<device>sv<subvendor>sd<subdevice>bc<class>sc<subclass>i<if>.
var modaliasPattern = regexp.MustCompile(`^pci:v0000([0-9A-Fa-f]{4})d0000([0-9A-Fa-f]{4})sv[0-9A-Fa-f]{8}sd[0-9A-Fa-f]{8}bc([0-9A-Fa-f]{2})sc([0-9A-Fa-f]{2})i[0-9A-Fa-f]{2}`)

// sysfsPCI reads what ghw reads (modalias and the driver link of each device) without ghw's
// pci.ids requirement. A device it cannot read is skipped with a note, not the whole list.
func (c *collector) sysfsPCI() ([]pciIDs, error) {
	dir := c.path("sys", "bus", "pci", "devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading /sys/bus/pci/devices: %w", unrooted(err, c.root))
	}
	var out []pciIDs
	for _, e := range entries {
		addr := e.Name()
		alias := c.readTrimmed("sys", "bus", "pci", "devices", addr, "modalias")
		m := modaliasPattern.FindStringSubmatch(alias)
		if m == nil {
			c.note("pci: %s: no readable modalias", addr)
			continue
		}
		d := pciIDs{
			address:  addr,
			vendor:   strings.ToLower(m[1]),
			product:  strings.ToLower(m[2]),
			class:    strings.ToLower(m[3]),
			subclass: strings.ToLower(m[4]),
		}
		if target, err := os.Readlink(filepath.Join(dir, addr, "driver")); err == nil {
			d.driver = filepath.Base(target)
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].address < out[j].address })
	return out, nil
}

// pciDatabase loads pci.ids from where distributions install it, under root; on the live
// system $PCIDB_PATH is tried first. Network fetching is always off.
func (c *collector) pciDatabase() (*pcidb.PCIDB, error) {
	var candidates []string
	if c.live {
		if p := os.Getenv("PCIDB_PATH"); p != "" {
			candidates = append(candidates, p)
		}
	}
	for _, dir := range []string{"hwdata", "misc"} {
		for _, name := range []string{"pci.ids", "pci.ids.gz"} {
			candidates = append(candidates, c.path("usr", "share", dir, name))
		}
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		return loadPCIDB(p)
	}
	return nil, errors.New("no pci.ids in /usr/share/hwdata or /usr/share/misc")
}

// loadPCIDB parses one pci.ids file. pcidb indexes lines without checking their length, so a
// damaged file panics; that is an unreadable database, not a failed PCI collector.
func loadPCIDB(path string) (db *pcidb.PCIDB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("pci.ids is damaged (%v)", p)
		}
	}()
	noFetch := false
	return pcidb.New(pcidb.WithPath(path), &pcidb.WithOption{EnableNetworkFetch: &noFetch})
}

// unrooted strips the root prefix from an error's paths so warnings read the same for every
// fixture location.
func unrooted(err error, root string) error {
	if root == "/" {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), root, ""))
}
