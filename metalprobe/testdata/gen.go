//go:build ignore

// gen writes the fixture trees under hosts/<name>/root: exactly the files ghw (and metalprobe's
// own few sysfs reads) look at, for the hosts described in gen_hosts.go. Run it from this
// directory and commit its output:
//
//	go run gen.go gen_hosts.go gen_data.go
//
// It rewrites hosts/<name>/root and leaves everything else (expected.json, README.md) alone:
// expected.json is written by hand from the host descriptions, not from this program or from
// the code under test.
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type host struct {
	name   string
	arch   string // /proc/sys/kernel/arch
	cpu    cpuSpec
	mem    memSpec
	disks  []disk
	pci    []pciFn
	nics   []nic
	dmi    map[string]string // /sys/class/dmi/id/<key>
	lldp   string            // lldpctl.json at the root; "" for none
	pciIDs string            // usr/share/misc/pci.ids; "" for none
}

type cpuSpec struct {
	vendor, model           string
	family, modelNum, step  int
	sockets, cores, threads int // cores per socket, threads per core
	mhz                     string
	maxKHz                  int // cpufreq/cpuinfo_max_freq; 0 for none
	flags                   string
}

type memSpec struct {
	totalKB    int64 // /proc/meminfo MemTotal (usable)
	blockSize  int64 // /sys/devices/system/memory/block_size_bytes; 0 for no such directory
	blocks     int   // online memory blocks
	syslogLine string
}

type disk struct {
	name              string
	major, minor      int
	sectors           int64 // 512-byte sectors, /sys/block/<name>/size
	rotational        bool
	removable         bool
	vendor            string   // /sys/block/<name>/device/vendor; "" for none
	udev              []string // E: entries of /run/udev/data/b<major>:<minor>
	virtual           bool     // lives under /sys/devices/virtual/block
	physicalBlockSize int
}

type pciFn struct {
	addr                 string
	vendor, device       uint16
	subVendor, subDevice uint16
	class                uint32 // base class, subclass, programming interface
	rev                  uint8
	driver               string
}

type nic struct {
	name       string
	mac        string
	assignType int    // addr_assign_type: 0 permanent, 3 set by userspace
	speed      string // "" for none
	operstate  string
	pci        string // PCI function the port is, or sits under (virtio)
	virtio     string // virtio device between PCI function and net device, e.g. virtio0
	virtual    bool   // /sys/devices/virtual/net
}

// tree is the set of files and symlinks to write below one root.
type tree struct {
	files map[string]string
	links map[string]string
}

func (t *tree) file(path string, content any) {
	s := fmt.Sprint(content)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	t.files[path] = s
}

func (t *tree) link(path, target string) { t.links[path] = target }

func main() {
	for _, h := range hosts() {
		root := filepath.Join("hosts", h.name, "root")
		if err := os.RemoveAll(root); err != nil {
			log.Fatal(err)
		}
		t := &tree{files: map[string]string{}, links: map[string]string{}}
		h.build(t)
		if err := t.write(root); err != nil {
			log.Fatalf("%s: %v", h.name, err)
		}
		fmt.Printf("%s: %d files, %d links\n", root, len(t.files), len(t.links))
	}
}

func (t *tree) write(root string) error {
	paths := make([]string, 0, len(t.files))
	for p := range t.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(t.files[p]), 0o644); err != nil {
			return err
		}
	}
	for p, target := range t.links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, full); err != nil {
			return err
		}
	}
	return nil
}

func (h host) build(t *tree) {
	t.file("proc/sys/kernel/arch", h.arch)
	h.buildCPU(t)
	h.buildMemory(t)
	for _, d := range h.disks {
		d.build(t)
	}
	for _, f := range h.pci {
		f.build(t)
	}
	for _, n := range h.nics {
		n.build(t)
	}
	for k, v := range h.dmi {
		t.file("sys/class/dmi/id/"+k, v)
	}
	if h.lldp != "" {
		t.file("lldpctl.json", h.lldp)
	}
	if h.pciIDs != "" {
		t.file("usr/share/misc/pci.ids", h.pciIDs)
	}
}

// buildCPU numbers logical processors the way Linux does on Intel: first thread of every core
// of every socket, then the hyper-thread siblings in the same order.
func (h host) buildCPU(t *tree) {
	c := h.cpu
	var info strings.Builder
	perThread := c.sockets * c.cores
	for th := 0; th < c.threads; th++ {
		for s := 0; s < c.sockets; s++ {
			for core := 0; core < c.cores; core++ {
				lp := th*perThread + s*c.cores + core
				dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d", lp)
				t.file(dir+"/topology/physical_package_id", s)
				t.file(dir+"/topology/core_id", core)
				if lp != 0 { // cpu0 cannot be taken offline and has no online file
					t.file(dir+"/online", 1)
				}
				if c.maxKHz > 0 {
					t.file(dir+"/cpufreq/cpuinfo_max_freq", c.maxKHz)
				}
				fmt.Fprintf(&info, "processor\t: %d\nvendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\n"+
					"model name\t: %s\nstepping\t: %d\ncpu MHz\t\t: %s\nphysical id\t: %d\nsiblings\t: %d\n"+
					"core id\t\t: %d\ncpu cores\t: %d\nflags\t\t: %s\n\n",
					lp, c.vendor, c.family, c.modelNum, c.model, c.step, c.mhz, s, c.cores*c.threads,
					core, c.cores, c.flags)
			}
		}
	}
	// /proc/cpuinfo ends each processor with a blank line; ghw drops a block without one.
	t.files["proc/cpuinfo"] = info.String()
}

func (h host) buildMemory(t *tree) {
	m := h.mem
	t.file("proc/meminfo", fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n"+
		"Buffers:            2048 kB\nCached:           262144 kB\nSwapTotal:             0 kB\n"+
		"HugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB\nHugetlb:               0 kB",
		m.totalKB, m.totalKB*9/10, m.totalKB*9/10))
	if m.blockSize > 0 {
		t.file("sys/devices/system/memory/block_size_bytes", fmt.Sprintf("%x", m.blockSize))
		for i := 0; i < m.blocks; i++ {
			t.file(fmt.Sprintf("sys/devices/system/memory/memory%d/state", i), "online")
		}
	}
	if m.syslogLine != "" {
		t.file("var/log/syslog", m.syslogLine)
	}
}

func (d disk) build(t *tree) {
	dir := "sys/block/" + d.name
	if d.virtual {
		dir = "sys/devices/virtual/block/" + d.name
		t.link("sys/block/"+d.name, "../devices/virtual/block/"+d.name)
	}
	t.file(dir+"/dev", fmt.Sprintf("%d:%d", d.major, d.minor))
	t.file(dir+"/size", d.sectors)
	t.file(dir+"/removable", b2i(d.removable))
	t.file(dir+"/queue/rotational", b2i(d.rotational))
	pbs := d.physicalBlockSize
	if pbs == 0 {
		pbs = 512
	}
	t.file(dir+"/queue/physical_block_size", pbs)
	if d.vendor != "" {
		t.file(dir+"/device/vendor", d.vendor)
	}
	if len(d.udev) > 0 {
		var b strings.Builder
		for _, e := range d.udev {
			if p, ok := strings.CutPrefix(e, "ID_PATH="); ok {
				fmt.Fprintf(&b, "S:disk/by-path/%s\n", p)
			}
		}
		for _, e := range d.udev {
			fmt.Fprintf(&b, "E:%s\n", e)
		}
		t.file(fmt.Sprintf("run/udev/data/b%d:%d", d.major, d.minor), b.String())
	}
}

// Every PCI function sits directly under pci0000:00: the fixture does not model bridges.
func (f pciFn) build(t *tree) {
	dir := "sys/devices/pci0000:00/" + f.addr
	t.link("sys/bus/pci/devices/"+f.addr, "../../../devices/pci0000:00/"+f.addr)
	t.file(dir+"/vendor", fmt.Sprintf("0x%04x", f.vendor))
	t.file(dir+"/device", fmt.Sprintf("0x%04x", f.device))
	t.file(dir+"/subsystem_vendor", fmt.Sprintf("0x%04x", f.subVendor))
	t.file(dir+"/subsystem_device", fmt.Sprintf("0x%04x", f.subDevice))
	t.file(dir+"/class", fmt.Sprintf("0x%06x", f.class))
	t.file(dir+"/revision", fmt.Sprintf("0x%02x", f.rev))
	t.file(dir+"/modalias", fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X",
		f.vendor, f.device, f.subVendor, f.subDevice, f.class>>16, (f.class>>8)&0xff, f.class&0xff))
	t.link(dir+"/subsystem", "../../../bus/pci")
	if f.driver != "" {
		t.link(dir+"/driver", "../../../bus/pci/drivers/"+f.driver)
		t.file("sys/bus/pci/drivers/"+f.driver+"/uevent", "")
	}
}

func (n nic) build(t *tree) {
	var dir string
	switch {
	case n.virtual:
		dir = "sys/devices/virtual/net/" + n.name
		t.link("sys/class/net/"+n.name, "../../devices/virtual/net/"+n.name)
	case n.virtio != "":
		vdir := "sys/devices/pci0000:00/" + n.pci + "/" + n.virtio
		dir = vdir + "/net/" + n.name
		t.link("sys/class/net/"+n.name, "../../devices/pci0000:00/"+n.pci+"/"+n.virtio+"/net/"+n.name)
		t.link(dir+"/device", "../../../"+n.virtio)
		t.file(vdir+"/vendor", "0x1af4")
		t.file(vdir+"/device", "0x0001")
		t.link(vdir+"/subsystem", "../../../../bus/virtio")
		t.link(vdir+"/driver", "../../../../bus/virtio/drivers/virtio_net")
		t.file("sys/bus/virtio/drivers/virtio_net/uevent", "")
	default:
		dir = "sys/devices/pci0000:00/" + n.pci + "/net/" + n.name
		t.link("sys/class/net/"+n.name, "../../devices/pci0000:00/"+n.pci+"/net/"+n.name)
		t.link(dir+"/device", "../../../"+n.pci)
	}
	t.file(dir+"/address", n.mac)
	t.file(dir+"/addr_assign_type", n.assignType)
	t.file(dir+"/operstate", n.operstate)
	if n.speed != "" {
		t.file(dir+"/speed", n.speed)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
