package wipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNVMeIoctlABI(t *testing.T) {
	assert.EqualValues(t, nvmeAdminCmdSize, unsafe.Sizeof(nvmeAdminCmd{}), "sizeof(struct nvme_admin_cmd)")
	assert.EqualValues(t, 72, nvmeAdminCmdSize)
	// Offsets of struct nvme_passthru_cmd (include/uapi/linux/nvme_ioctl.h).
	var c nvmeAdminCmd
	assert.EqualValues(t, 4, unsafe.Offsetof(c.NSID))
	assert.EqualValues(t, 16, unsafe.Offsetof(c.Metadata))
	assert.EqualValues(t, 24, unsafe.Offsetof(c.Addr))
	assert.EqualValues(t, 36, unsafe.Offsetof(c.DataLen))
	assert.EqualValues(t, 40, unsafe.Offsetof(c.Cdw10))
	assert.EqualValues(t, 64, unsafe.Offsetof(c.TimeoutMs))
	assert.EqualValues(t, 68, unsafe.Offsetof(c.Result))
	assert.EqualValues(t, 0xC0484E41, nvmeIoctlAdminCmd, "_IOWR('N', 0x41, struct nvme_admin_cmd)")
	assert.EqualValues(t, 0x4E40, nvmeIoctlID, "_IO('N', 0x40)")
}

func TestFormatCDW10KeepsTheNamespaceFormat(t *testing.T) {
	assert.Equal(t, uint32(0x200), formatCDW10(0, 0, sesUserDataErase), "LBA format 0, no metadata, no PI: only SES=1 (bits 11:9)")
	assert.Equal(t, uint32(0x201), formatCDW10(1, 0, sesUserDataErase))
	// LBA format 2, metadata at the end of the LBA (MSET), PI type 1 in the first bytes (PIL).
	assert.Equal(t, uint32(2|1<<4|1<<5|1<<8|1<<9), formatCDW10(0x12, 0x9, sesUserDataErase))
	// FLBAS bits 6:5 are the format index's upper bits: CDW10 13:12 (LBAFU).
	assert.Equal(t, uint32(0x3|1<<9|2<<12), formatCDW10(0x43, 0, sesUserDataErase))
}

// fakeNVMe is a controller with one namespace, answering the admin commands the eraser sends.
type fakeNVMe struct {
	nsid        uint32
	nsidErr     error
	oacs        uint16
	sanicap     uint32
	fna         uint8
	flbas, dps  uint8
	identifyErr error
	formatErr   []error // one per Format NVM, in turn; nil: success
	sanitizeErr error
	sstat       []uint16 // Sanitize Status log SSTAT per read; the last one repeats
	cmds        []nvmeAdminCmd
	logs        int
	// onLog, when set, runs after each Sanitize Status read (with the count so far).
	onLog func(n int)
}

func (f *fakeNVMe) NamespaceID() (uint32, error) { return f.nsid, f.nsidErr }

func (f *fakeNVMe) Admin(cmd *nvmeAdminCmd, data []byte) error {
	f.cmds = append(f.cmds, *cmd)
	switch cmd.Opcode {
	case nvmeOpIdentify:
		if f.identifyErr != nil {
			return f.identifyErr
		}
		if len(data) != nvmeIdentifyBytes {
			return fmt.Errorf("identify with %d bytes", len(data))
		}
		switch cmd.Cdw10 {
		case nvmeCNSController:
			binary.LittleEndian.PutUint16(data[idCtrlOACS:], f.oacs)
			binary.LittleEndian.PutUint32(data[idCtrlSANICAP:], f.sanicap)
			data[idCtrlFNA] = f.fna
		case nvmeCNSNamespace:
			if cmd.NSID != f.nsid {
				return nvmeStatus(0x0B)
			}
			data[idNSFLBAS], data[idNSDPS] = f.flbas, f.dps
		}
	case nvmeOpFormatNVM:
		if len(f.formatErr) == 0 {
			return nil
		}
		err := f.formatErr[0]
		f.formatErr = f.formatErr[1:]
		return err
	case nvmeOpSanitize:
		return f.sanitizeErr
	case nvmeOpGetLogPage:
		if cmd.Cdw10&0xff != nvmeLogSanitizeStatus || len(data) != nvmeSanitizeLogBytes || cmd.Cdw10>>16 != 127 {
			return nvmeStatus(0x02)
		}
		st := uint16(0)
		if len(f.sstat) > 0 {
			st = f.sstat[min(f.logs, len(f.sstat)-1)]
		}
		f.logs++
		if f.onLog != nil {
			f.onLog(f.logs)
		}
		binary.LittleEndian.PutUint16(data[0:], 0x8000) // 50%
		binary.LittleEndian.PutUint16(data[2:], st)
	default:
		return nvmeStatus(0x01)
	}
	return nil
}

func (f *fakeNVMe) opcodes() []uint8 {
	var ops []uint8
	for _, c := range f.cmds {
		ops = append(ops, c.Opcode)
	}
	return ops
}

func fastPoll(t *testing.T) {
	old := nvmeSanitizePoll
	nvmeSanitizePoll = time.Millisecond
	t.Cleanup(func() { nvmeSanitizePoll = old })
}

func TestNVMeFormatsWithSecureEraseWhenThereIsNoSanitize(t *testing.T) {
	// As QEMU 7.2's controller: Format NVM, no Sanitize.
	f := &fakeNVMe{nsid: 1, oacs: 0x000a, flbas: 0x12, dps: 0x9}
	what, err := nvmeErase(context.Background(), f)
	require.NoError(t, err)
	assert.Equal(t, "NVMe Format NVM, Secure Erase Settings 1 (user data erase), namespace 1, LBA format 2 kept (OACS 0xa, SANICAP 0x0, FNA 0x0)", what)
	assert.Equal(t, []uint8{nvmeOpIdentify, nvmeOpIdentify, nvmeOpFormatNVM}, f.opcodes())
	format := f.cmds[2]
	assert.Equal(t, uint32(1), format.NSID)
	assert.Equal(t, uint32(2|1<<4|1<<5|1<<8|1<<9), format.Cdw10)
	assert.Equal(t, uint32(3_600_000), format.TimeoutMs, "the driver's 60 s default would abort a long format")
	assert.Equal(t, uint32(1), f.cmds[0].Cdw10, "Identify Controller is CNS 1")
	assert.Equal(t, uint32(1), f.cmds[1].NSID, "Identify Namespace of the namespace")
}

func TestNVMeFormatOnAControllerThatFormatsAllNamespaces(t *testing.T) {
	f := &fakeNVMe{nsid: 2, oacs: oacsFormatNVM, fna: fnaFormatAll | fnaSecureEraseAll, formatErr: []error{nvmeStatus(0x0B), nil}}
	what, err := nvmeErase(context.Background(), f)
	require.NoError(t, err)
	assert.Contains(t, what, "all namespaces (NSID 0xFFFFFFFF: namespace 2 alone was refused with NVMe status 0xb (SCT 0, SC 0x0b: Invalid Namespace or Format))")
	assert.Contains(t, what, "a secure erase covers all its namespaces")
	require.Len(t, f.cmds, 4)
	assert.Equal(t, uint32(2), f.cmds[2].NSID)
	assert.Equal(t, uint32(nvmeNSIDAll), f.cmds[3].NSID)
}

func TestNVMeFormatFailureIsAFailureNotUnsupported(t *testing.T) {
	f := &fakeNVMe{nsid: 1, oacs: oacsFormatNVM, formatErr: []error{nvmeStatus(0x4002)}}
	_, err := nvmeErase(context.Background(), f)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrSecureEraseUnsupported, "a format was issued: it must be looked at")
	assert.EqualError(t, err, "NVMe Format NVM, Secure Erase Settings 1 (user data erase), namespace 1, CDW10 0x200: NVMe status 0x4002 (SCT 0, SC 0x02: Invalid Field in Command)")
}

func TestNVMePrefersSanitizeBlockEraseAndWaitsForIt(t *testing.T) {
	fastPoll(t)
	f := &fakeNVMe{nsid: 1, oacs: oacsFormatNVM, sanicap: sanicapBlockErase | sanicapCryptoErase,
		sstat: []uint16{sstatCompleted, sstatInProgress, sstatInProgress, sstatCompleted}}
	what, err := nvmeErase(context.Background(), f)
	require.NoError(t, err)
	assert.Contains(t, what, "NVMe Sanitize (block erase) of the whole NVM subsystem, completed in ")
	assert.Contains(t, what, "(OACS 0x2, SANICAP 0x3, FNA 0x0)")
	assert.Equal(t, []uint8{nvmeOpIdentify, nvmeOpIdentify, nvmeOpGetLogPage, nvmeOpSanitize, nvmeOpGetLogPage, nvmeOpGetLogPage, nvmeOpGetLogPage}, f.opcodes(), "no Format after a Sanitize")
	assert.Equal(t, uint32(sanactBlockErase), f.cmds[3].Cdw10)
	assert.Equal(t, uint32(nvmeNSIDAll), f.cmds[2].NSID, "the sanitize log is the controller's")
}

func TestNVMeSanitizeCryptoEraseWhenThatIsAllThereIs(t *testing.T) {
	fastPoll(t)
	f := &fakeNVMe{nsid: 1, sanicap: sanicapCryptoErase, sstat: []uint16{0, sstatCompletedNoDea}}
	what, err := nvmeErase(context.Background(), f)
	require.NoError(t, err)
	assert.Contains(t, what, "NVMe Sanitize (crypto erase)")
	assert.Equal(t, uint32(sanactCryptoErase), f.cmds[3].Cdw10)
}

func TestNVMeSanitizeThatFailsIsAFailure(t *testing.T) {
	fastPoll(t)
	f := &fakeNVMe{nsid: 1, oacs: oacsFormatNVM, sanicap: sanicapBlockErase, sstat: []uint16{0, sstatInProgress, sstatFailed}}
	_, err := nvmeErase(context.Background(), f)
	require.EqualError(t, err, "NVMe Sanitize (block erase) failed (Sanitize Status log: SSTAT 3)")
	assert.NotErrorIs(t, err, ErrSecureEraseUnsupported)
	assert.NotContains(t, f.opcodes(), uint8(nvmeOpFormatNVM), "a controller in sanitize failure mode is not formatted")
}

func TestNVMeSanitizeRejectedFallsToFormat(t *testing.T) {
	f := &fakeNVMe{nsid: 1, oacs: oacsFormatNVM, sanicap: sanicapBlockErase, sanitizeErr: nvmeStatus(0x4002)}
	what, err := nvmeErase(context.Background(), f)
	require.NoError(t, err)
	assert.Contains(t, what, "NVMe Format NVM, Secure Erase Settings 1")
	assert.Contains(t, what, "before it, NVMe Sanitize (block erase) rejected: NVMe status 0x4002")

	f = &fakeNVMe{nsid: 1, sanicap: sanicapBlockErase, sanitizeErr: nvmeStatus(0x4002)}
	_, err = nvmeErase(context.Background(), f)
	require.ErrorIs(t, err, ErrSecureEraseUnsupported, "rejected and no Format: nothing was erased")
	assert.EqualError(t, err, "no device-level secure erase: NVMe: NVMe Sanitize (block erase) rejected: NVMe status 0x4002 (SCT 0, SC 0x02: Invalid Field in Command); Format NVM is not supported (OACS 0x0, SANICAP 0x2, FNA 0x0)")
}

func TestNVMeSanitizeInterrupted(t *testing.T) {
	fastPoll(t)
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeNVMe{nsid: 1, sanicap: sanicapBlockErase, sstat: []uint16{0, sstatInProgress}}
	// Cancelled once the sanitize is seen in progress: the erase must stop waiting for it.
	f.onLog = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	_, err := nvmeErase(ctx, f)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrSecureEraseUnsupported)
	assert.ErrorContains(t, err, "NVMe Sanitize (block erase): interrupted at 50% (the controller carries on with it)")
}

func TestNVMeWithoutEraseOrIdentifyIsUnsupported(t *testing.T) {
	for _, tc := range []struct {
		f    *fakeNVMe
		want string
	}{
		{&fakeNVMe{nsid: 1, oacs: 0x8}, "no device-level secure erase: NVMe: neither Sanitize nor Format NVM is supported (OACS 0x8, SANICAP 0x0, FNA 0x0)"},
		{&fakeNVMe{nsidErr: errors.New("inappropriate ioctl for device")}, "no device-level secure erase: NVMe: NVME_IOCTL_ID: inappropriate ioctl for device"},
		{&fakeNVMe{nsid: 1, identifyErr: errors.New("EIO")}, "no device-level secure erase: NVMe: Identify Controller: EIO"},
	} {
		_, err := nvmeErase(context.Background(), tc.f)
		require.ErrorIs(t, err, ErrSecureEraseUnsupported)
		assert.EqualError(t, err, tc.want)
		assert.NotContains(t, tc.f.opcodes(), uint8(nvmeOpFormatNVM))
		assert.NotContains(t, tc.f.opcodes(), uint8(nvmeOpSanitize))
	}
}

func TestNVMeNamespaceNames(t *testing.T) {
	for name, want := range map[string]bool{"nvme0n1": true, "nvme12n3": true, "nvme0n1p1": false, "nvme0": false, "vda": false, "nvme0c0n1": false} {
		assert.Equal(t, want, nvmeNamespaceName.MatchString(name), name)
	}
}
