package vm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// prepareDisks creates each disk as a sparse raw file of its size, or keeps the file already
// there (a disk outlives its VM object, as a real disk outlives a power cycle).
func prepareDisks(dir string, disks []Disk) ([]string, error) {
	paths := make([]string, len(disks))
	for i, d := range disks {
		path := filepath.Join(dir, fmt.Sprintf("disk%d-%s.raw", i, d.Bus))
		paths[i] = path
		if st, err := os.Stat(path); err == nil {
			if st.Size() != d.SizeBytes {
				return nil, fmt.Errorf("disk %d: %s exists with %d bytes, the definition says %d", i, path, st.Size(), d.SizeBytes)
			}
			continue
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create disk %d: %w", i, err)
		}
		err = f.Truncate(d.SizeBytes) // sparse: no block is written until the guest writes
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return nil, fmt.Errorf("size disk %d to %d bytes: %w", i, d.SizeBytes, err)
		}
	}
	return paths, nil
}

// prepareFirmwareVars copies the OVMF variable store template once: UEFI writes its boot
// entries there, so each VM needs its own, kept across restarts like a real NVRAM.
func prepareFirmwareVars(dir, template string) (string, error) {
	path := filepath.Join(dir, "OVMF_VARS.fd")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	src, err := os.Open(template)
	if err != nil {
		return "", fmt.Errorf("open the OVMF variable store template (package ovmf): %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("create the VM's OVMF variable store: %w", err)
	}
	_, err = io.Copy(dst, src)
	if closeErr := dst.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return "", fmt.Errorf("copy the OVMF variable store: %w", err)
	}
	return path, nil
}

// maxSocketPath keeps unix socket paths under the kernel's 108-byte sun_path.
const maxSocketPath = 100

// socketDir is where the QMP socket goes: the VM's directory when the path fits in a
// sun_path, else a short private directory under /tmp (test directories can be long). The
// returned cleanup removes the private directory.
func socketDir(dir string) (string, func(), error) {
	if len(filepath.Join(dir, "qmp.sock")) <= maxSocketPath {
		return dir, func() {}, nil
	}
	short, err := os.MkdirTemp("/tmp", "ironfleet-qmp-")
	if err != nil {
		return "", nil, fmt.Errorf("create a short directory for the QMP socket: %w", err)
	}
	return short, func() { _ = os.RemoveAll(short) }, nil
}
