package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// markDisks writes the tenant's data (contract.TenantData at contract.MarkOffsets) on every
// whole disk in sysBlock (/sys/class/block) through its node in devDir, and syncs each: the
// data a tenant leaves behind, for the test to look for after the wipe. Partitions, optical
// drives and devices without a medium are passed over. The OS runs from its initramfs, so the
// disk it booted from may be written too. It stops at the first disk it cannot write.
func markDisks(sysBlock, devDir string) ([]contract.MarkedDisk, error) {
	var marked []contract.MarkedDisk
	_, disks := partitionsAndDisks(sysBlock)
	for _, name := range disks {
		if strings.HasPrefix(name, "sr") {
			continue
		}
		sectors, err := os.ReadFile(filepath.Join(sysBlock, name, "size"))
		if err != nil {
			return marked, fmt.Errorf("the size of %s: %w", name, err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(sectors)), 10, 64)
		if err != nil {
			return marked, fmt.Errorf("the size of %s: %w", name, err)
		}
		size := n * 512 // sysfs counts 512-byte sectors whatever the device's own
		if size == 0 {
			continue
		}
		blocks, err := markDisk(filepath.Join(devDir, name), size)
		if err != nil {
			return marked, fmt.Errorf("marking %s: %w", name, err)
		}
		marked = append(marked, contract.MarkedDisk{Device: name, Bytes: size, Blocks: blocks})
	}
	if len(marked) == 0 {
		return nil, errors.New("no disk to mark")
	}
	return marked, nil
}

// markDisk writes the tenant's data at each of contract.MarkOffsets(size) on dev and syncs it.
func markDisk(dev string, size int64) (int, error) {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	offs := contract.MarkOffsets(size)
	for _, off := range offs {
		if _, err := f.WriteAt(contract.TenantData(off, contract.MarkBlock), off); err != nil {
			_ = f.Close()
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return 0, err
	}
	return len(offs), f.Close()
}
