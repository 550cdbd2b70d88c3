package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoCDROM is what the media controls return for a VM defined without a CD/DVD drive.
var ErrNoCDROM = errors.New("the VM has no CD/DVD drive")

// Media is the image in the VM's CD/DVD drive, "" when it is empty. The medium stays across
// power cycles, as a disc stays in a drive: each start attaches it.
func (v *VM) Media() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.layout.CDROMFile
}

// InsertMedia puts the raw image (an ISO) at path in the CD/DVD drive, replacing what is
// there. A running QEMU changes it at once with QMP blockdev-change-medium, forcing the tray
// open even when the guest locked it, as a BMC's virtual media does; a VM that is off starts
// with it.
func (v *VM) InsertMedia(path string) error {
	if !v.def.CDROM {
		return fmt.Errorf("VM %q: %w", v.def.Name, ErrNoCDROM)
	}
	abs, err := filepath.Abs(path) // QEMU runs in Options.Dir
	if err != nil {
		return fmt.Errorf("VM %q: medium %s: %w", v.def.Name, path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("VM %q: medium: %w", v.def.Name, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("VM %q: medium %s is not a regular file", v.def.Name, abs)
	}
	return v.changeMedia(abs, "blockdev-change-medium", map[string]any{
		"id": cdDevice, "filename": abs, "format": "raw", "read-only-mode": "read-only", "force": true,
	})
}

// EjectMedia empties the CD/DVD drive (force: a guest's tray lock does not hold it back).
// Ejecting an empty drive does nothing.
func (v *VM) EjectMedia() error {
	if !v.def.CDROM {
		return fmt.Errorf("VM %q: %w", v.def.Name, ErrNoCDROM)
	}
	return v.changeMedia("", "eject", map[string]any{"id": cdDevice, "force": true})
}

// changeMedia records the drive's new medium and applies it to a running QEMU. It holds the
// controls' lock, so a start in between cannot miss the change.
func (v *VM) changeMedia(file, command string, args map[string]any) error {
	v.ops.Lock()
	defer v.ops.Unlock()
	v.mu.Lock()
	closed := v.closed
	if !closed {
		v.layout.CDROMFile = file
	}
	r := v.run
	v.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if r == nil {
		return nil // the next start attaches it
	}
	if _, err := r.command(command, args); err != nil {
		select {
		case <-r.done: // QEMU exited meanwhile: the next start attaches the medium
			return nil
		default:
		}
		return fmt.Errorf("VM %q: %s: %w", v.def.Name, command, err)
	}
	return nil
}
