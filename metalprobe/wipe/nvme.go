package wipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// This file speaks NVMe admin commands (NVM Express Base Specification 2.0) to a controller
// behind the nvmeAdmin interface: the Linux driver's passthrough ioctl on a real host
// (host_linux.go), a fake controller in tests.

// nvmeAdminCmd is the kernel's struct nvme_admin_cmd (= struct nvme_passthru_cmd,
// include/uapi/linux/nvme_ioctl.h): 72 bytes, the submission queue entry's fields plus the
// user buffer, a timeout and the completion's result dword.
type nvmeAdminCmd struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	Cdw2        uint32
	Cdw3        uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	Cdw10       uint32
	Cdw11       uint32
	Cdw12       uint32
	Cdw13       uint32
	Cdw14       uint32
	Cdw15       uint32
	TimeoutMs   uint32
	Result      uint32
}

// nvmeAdminCmdSize is sizeof(struct nvme_admin_cmd).
const nvmeAdminCmdSize = 72

// ioc is the kernel's generic _IOC encoding (x86, arm64, riscv: not powerpc, mips, sparc).
func ioc(dir, typ, nr, size uintptr) uintptr { return dir<<30 | size<<16 | typ<<8 | nr }

// The NVMe driver's ioctls (include/uapi/linux/nvme_ioctl.h).
var (
	nvmeIoctlID       = ioc(0, 'N', 0x40, 0)                // _IO('N', 0x40): the namespace id
	nvmeIoctlAdminCmd = ioc(3, 'N', 0x41, nvmeAdminCmdSize) // _IOWR('N', 0x41, struct nvme_admin_cmd)
)

// Admin opcodes, Identify CNS values and log pages used here.
const (
	nvmeOpGetLogPage = 0x02
	nvmeOpIdentify   = 0x06
	nvmeOpFormatNVM  = 0x80
	nvmeOpSanitize   = 0x84

	nvmeCNSNamespace  = 0x00
	nvmeCNSController = 0x01

	nvmeLogSanitizeStatus = 0x81
	nvmeSanitizeLogBytes  = 512
	nvmeIdentifyBytes     = 4096

	nvmeNSIDAll = 0xFFFFFFFF
)

// Identify Controller fields (byte offsets) and their bits.
const (
	idCtrlOACS    = 256 // 2 bytes: Optional Admin Command Support
	idCtrlSANICAP = 328 // 4 bytes: Sanitize Capabilities
	idCtrlFNA     = 524 // 1 byte: Format NVM Attributes

	oacsFormatNVM = 1 << 1

	sanicapCryptoErase = 1 << 0
	sanicapBlockErase  = 1 << 1

	fnaFormatAll      = 1 << 0 // a format of one namespace formats all of them
	fnaSecureEraseAll = 1 << 1 // a secure erase of one namespace erases all of them
)

// Identify Namespace fields (byte offsets).
const (
	idNSFLBAS = 26 // Formatted LBA Size: format index bits 3:0 and 6:5, metadata setting bit 4
	idNSDPS   = 29 // End-to-end Data Protection Type Settings: PI type bits 2:0, PI location bit 3
)

// Sanitize actions (CDW10 bits 2:0) and Sanitize Status (log 81h, SSTAT bits 2:0).
const (
	sanactBlockErase  = 0x2
	sanactCryptoErase = 0x4

	sstatCompleted      = 1
	sstatInProgress     = 2
	sstatFailed         = 3
	sstatCompletedNoDea = 4 // completed, No-Deallocate After Sanitize had been asked for
)

// Format NVM's Secure Erase Settings (CDW10 bits 11:9): 1 is User Data Erase.
const sesUserDataErase = 1

// How long the kernel waits for one admin command before it aborts it (and resets the
// controller): a Format with secure erase runs in the command itself and can take minutes on
// a large drive. Identify and Get Log Page use the driver's default (60 s).
const nvmeFormatTimeout = time.Hour

// nvmeSanitizePoll is how often the Sanitize Status log is read while a sanitize runs.
var nvmeSanitizePoll = time.Second

// nvmeStatus is a command that completed with a non-zero NVMe status: the ioctl's positive
// return, the completion's Status Field without the phase tag (SCT bits 10:8, SC bits 7:0,
// More bit 13, DNR bit 14).
type nvmeStatus uint16

func (s nvmeStatus) sct() int { return int(s>>8) & 0x7 }
func (s nvmeStatus) sc() int  { return int(s) & 0xff }

func (s nvmeStatus) Error() string {
	name := map[[2]int]string{
		{0, 0x01}: "Invalid Command Opcode",
		{0, 0x02}: "Invalid Field in Command",
		{0, 0x0B}: "Invalid Namespace or Format",
		{0, 0x1D}: "Sanitize Failed",
		{0, 0x1E}: "Sanitize In Progress",
		{1, 0x0A}: "Invalid Format",
		{1, 0x0B}: "Firmware Activation Requires Conventional Reset",
		{1, 0x15}: "Namespace Insufficient Capacity",
		{1, 0x23}: "Sanitize Prohibited While Persistent Memory Region is Enabled",
	}[[2]int{s.sct(), s.sc()}]
	if name == "" {
		name = "unknown"
	}
	return fmt.Sprintf("NVMe status 0x%x (SCT %d, SC 0x%02x: %s)", uint16(s), s.sct(), s.sc(), name)
}

// nvmeAdmin submits admin commands to the controller of one namespace.
type nvmeAdmin interface {
	// NamespaceID is the namespace's id (NVME_IOCTL_ID).
	NamespaceID() (uint32, error)
	// Admin submits cmd with data as its buffer (cmd.Addr and cmd.DataLen are set from it)
	// and waits for the completion; a non-zero status is an nvmeStatus.
	Admin(cmd *nvmeAdminCmd, data []byte) error
}

// nvmeNamespaceName matches an NVMe namespace's block device, not its partitions.
var nvmeNamespaceName = regexp.MustCompile(`^nvme[0-9]+n[0-9]+$`)

// nvmeIdentity is what the erase needs from Identify.
type nvmeIdentity struct {
	nsid          uint32
	oacs          uint16
	sanicap       uint32
	fna           uint8
	flbas, dps    uint8
	sanitizeState int // SSTAT before the erase, -1 when the log could not be read
}

// identify reads the namespace id, Identify Controller and Identify Namespace. Any failure is
// ErrSecureEraseUnsupported: nothing has been erased yet.
func identify(a nvmeAdmin) (nvmeIdentity, error) {
	var id nvmeIdentity
	nsid, err := a.NamespaceID()
	if err != nil {
		return id, unsupported("NVMe: NVME_IOCTL_ID: %v", err)
	}
	id.nsid = nsid
	ctrl := make([]byte, nvmeIdentifyBytes)
	if err := a.Admin(&nvmeAdminCmd{Opcode: nvmeOpIdentify, Cdw10: nvmeCNSController}, ctrl); err != nil {
		return id, unsupported("NVMe: Identify Controller: %v", err)
	}
	id.oacs = binary.LittleEndian.Uint16(ctrl[idCtrlOACS:])
	id.sanicap = binary.LittleEndian.Uint32(ctrl[idCtrlSANICAP:])
	id.fna = ctrl[idCtrlFNA]
	ns := make([]byte, nvmeIdentifyBytes)
	if err := a.Admin(&nvmeAdminCmd{Opcode: nvmeOpIdentify, NSID: nsid, Cdw10: nvmeCNSNamespace}, ns); err != nil {
		return id, unsupported("NVMe: Identify Namespace %d: %v", nsid, err)
	}
	id.flbas, id.dps = ns[idNSFLBAS], ns[idNSDPS]
	return id, nil
}

// formatCDW10 is Format NVM's CDW10 that keeps the namespace's current format (LBA format,
// metadata setting, protection information) and asks for ses.
func formatCDW10(flbas, dps uint8, ses uint32) uint32 {
	lbaf := uint32(flbas & 0xf)
	mset := uint32(flbas>>4) & 1
	lbafu := uint32(flbas>>5) & 0x3
	pi := uint32(dps & 0x7)
	pil := uint32(dps>>3) & 1
	return lbaf | mset<<4 | pi<<5 | pil<<8 | ses<<9 | lbafu<<12
}

// nvmeErase erases the namespace behind a: Sanitize when the controller has it, else Format
// NVM with Secure Erase Settings 1 (see HostEraser). It returns what ran; an error wrapping
// ErrSecureEraseUnsupported when nothing could be issued.
func nvmeErase(ctx context.Context, a nvmeAdmin) (string, error) {
	id, err := identify(a)
	if err != nil {
		return "", err
	}
	caps := fmt.Sprintf("OACS 0x%x, SANICAP 0x%x, FNA 0x%x", id.oacs, id.sanicap, id.fna)
	var notes []string
	if action, name := sanitizeAction(id.sanicap); action != 0 {
		what, err := nvmeSanitize(ctx, a, action, name)
		if err == nil {
			return fmt.Sprintf("%s (%s)", what, caps), nil
		}
		if !errors.Is(err, errSanitizeRejected) {
			return "", err
		}
		// Rejected before it started: nothing changed, Format may still be possible.
		notes = append(notes, err.Error())
	}
	if id.oacs&oacsFormatNVM == 0 {
		if len(notes) > 0 {
			return "", unsupported("NVMe: %s; Format NVM is not supported (%s)", joinReasons(notes), caps)
		}
		return "", unsupported("NVMe: neither Sanitize nor Format NVM is supported (%s)", caps)
	}
	what, err := nvmeFormat(a, id)
	if err != nil {
		if len(notes) > 0 {
			return "", fmt.Errorf("%s; %w", joinReasons(notes), err)
		}
		return "", err
	}
	what += " (" + caps + ")"
	if len(notes) > 0 {
		what += "; before it, " + joinReasons(notes)
	}
	return what, nil
}

// sanitizeAction picks the sanitize to run: Block Erase, else Crypto Erase, else none (0).
func sanitizeAction(sanicap uint32) (uint32, string) {
	switch {
	case sanicap&sanicapBlockErase != 0:
		return sanactBlockErase, "block erase"
	case sanicap&sanicapCryptoErase != 0:
		return sanactCryptoErase, "crypto erase"
	}
	return 0, ""
}

// errSanitizeRejected marks a Sanitize command the controller failed at submission: no
// sanitize started.
var errSanitizeRejected = errors.New("rejected")

// nvmeSanitize starts a sanitize and polls its status until it ends.
func nvmeSanitize(ctx context.Context, a nvmeAdmin, action uint32, name string) (string, error) {
	// A sanitize already running (a previous probe's) must end before another starts.
	if _, err := waitSanitize(ctx, a, false); err != nil {
		return "", err
	}
	cmd := &nvmeAdminCmd{Opcode: nvmeOpSanitize, Cdw10: action}
	if err := a.Admin(cmd, nil); err != nil {
		var st nvmeStatus
		if errors.As(err, &st) {
			return "", fmt.Errorf("NVMe Sanitize (%s) %w: %w", name, errSanitizeRejected, err)
		}
		return "", fmt.Errorf("NVMe Sanitize (%s): %w", name, err)
	}
	start := time.Now()
	state, err := waitSanitize(ctx, a, true)
	if err != nil {
		return "", fmt.Errorf("NVMe Sanitize (%s): %w", name, err)
	}
	switch state {
	case sstatCompleted, sstatCompletedNoDea:
		return fmt.Sprintf("NVMe Sanitize (%s) of the whole NVM subsystem, completed in %s", name, time.Since(start).Round(time.Millisecond)), nil
	case sstatFailed:
		return "", fmt.Errorf("NVMe Sanitize (%s) failed (Sanitize Status log: SSTAT %d)", name, state)
	}
	return "", fmt.Errorf("NVMe Sanitize (%s): the Sanitize Status log says SSTAT %d, not completed", name, state)
}

// waitSanitize reads the Sanitize Status log until no sanitize is in progress and returns the
// last state. Before a sanitize (started false) a log that cannot be read is no obstacle.
func waitSanitize(ctx context.Context, a nvmeAdmin, started bool) (int, error) {
	for {
		log := make([]byte, nvmeSanitizeLogBytes)
		numd := uint32(nvmeSanitizeLogBytes/4 - 1)
		err := a.Admin(&nvmeAdminCmd{Opcode: nvmeOpGetLogPage, NSID: nvmeNSIDAll, Cdw10: nvmeLogSanitizeStatus | (numd&0xffff)<<16, Cdw11: numd >> 16}, log)
		if err != nil {
			if !started {
				return -1, nil
			}
			return -1, fmt.Errorf("reading the Sanitize Status log: %w", err)
		}
		state := int(binary.LittleEndian.Uint16(log[2:]) & 0x7)
		if state != sstatInProgress {
			return state, nil
		}
		progress := float64(binary.LittleEndian.Uint16(log[0:])) / 65536 * 100
		select {
		case <-ctx.Done():
			return state, fmt.Errorf("interrupted at %.0f%% (the controller carries on with it): %w", progress, ctx.Err())
		case <-time.After(nvmeSanitizePoll):
		}
	}
}

// nvmeFormat runs Format NVM with Secure Erase Settings 1 on the namespace, keeping its format.
func nvmeFormat(a nvmeAdmin, id nvmeIdentity) (string, error) {
	cdw10 := formatCDW10(id.flbas, id.dps, sesUserDataErase)
	cmd := &nvmeAdminCmd{Opcode: nvmeOpFormatNVM, NSID: id.nsid, Cdw10: cdw10, TimeoutMs: uint32(nvmeFormatTimeout / time.Millisecond)}
	scope := fmt.Sprintf("namespace %d", id.nsid)
	err := a.Admin(cmd, nil)
	var st nvmeStatus
	if errors.As(err, &st) && st.sct() == 0 && st.sc() == 0x0B && id.fna&(fnaFormatAll|fnaSecureEraseAll) != 0 {
		// The controller formats all namespaces at once and wants to be asked for all.
		cmd = &nvmeAdminCmd{Opcode: nvmeOpFormatNVM, NSID: nvmeNSIDAll, Cdw10: cdw10, TimeoutMs: cmd.TimeoutMs}
		scope = fmt.Sprintf("all namespaces (NSID 0x%X: namespace %d alone was refused with %v)", uint32(nvmeNSIDAll), id.nsid, err)
		err = a.Admin(cmd, nil)
	}
	if err != nil {
		return "", fmt.Errorf("NVMe Format NVM, Secure Erase Settings %d (user data erase), %s, CDW10 0x%x: %w", sesUserDataErase, scope, cdw10, err)
	}
	what := fmt.Sprintf("NVMe Format NVM, Secure Erase Settings %d (user data erase), %s, LBA format %d kept", sesUserDataErase, scope, id.flbas&0xf|(id.flbas>>5&3)<<4)
	if id.fna&fnaSecureEraseAll != 0 {
		what += "; the controller's FNA says a secure erase covers all its namespaces"
	}
	return what, nil
}
