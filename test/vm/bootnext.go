package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf16"
)

// A BMC that is told to boot its host by UEFI HTTP boot from a URI (Redfish Boot.HttpBootUri)
// writes the host firmware a boot option for that URI and makes it the next boot (UEFI's
// BootNext). SetHTTPBootNext does the same to a VM's OVMF variable store, while QEMU is not
// running: OVMF's boot manager then boots the URI at the next start, before its BootOrder,
// and HttpBootDxe asks DHCP for an address only and fetches the URI itself.

// efiGlobalVariableGUID is EFI_GLOBAL_VARIABLE (8be4df61-93ca-11d2-aa0d-00e098032b8c), the
// vendor of Boot####, BootOrder and BootNext, in the little-endian layout of EFI_GUID.
var efiGlobalVariableGUID = [16]byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}

// authenticatedVariableStoreGUID is gEfiAuthenticatedVariableGuid
// (aaf32c78-947b-439a-a180-2e144ec37792): the signature of a VARIABLE_STORE_HEADER whose
// variables have AUTHENTICATED_VARIABLE_HEADERs, as OVMF's stores have.
var authenticatedVariableStoreGUID = [16]byte{0x78, 0x2c, 0xf3, 0xaa, 0x7b, 0x94, 0x9a, 0x43, 0xa1, 0x80, 0x2e, 0x14, 0x4e, 0xc3, 0x77, 0x92}

const (
	// httpBootOption is the Boot#### number SetHTTPBootNext writes, far above the options
	// OVMF numbers from 0000 itself.
	httpBootOption = 0x0F00
	// httpBootDescription is that boot option's description, which boot menus show.
	httpBootDescription = "Ironfleet HTTP boot"

	fvSignatureOffset  = 0x28 // "_FVH" in EFI_FIRMWARE_VOLUME_HEADER
	fvHeaderLenOffset  = 0x30 // its UINT16 HeaderLength: where the variable store begins
	varStoreHeaderLen  = 28   // VARIABLE_STORE_HEADER: Signature GUID, UINT32 Size, Format, State, reserved
	varStoreFormatted  = 0x5A
	varStoreHealthy    = 0xFE
	varDeletedMask     = 0xFD // State &= this marks a variable deleted (VAR_DELETED)
	varInDeletedTrans  = 0xFE // State &= this: being deleted (VAR_IN_DELETED_TRANSITION)
	efiVariableNVBSRT  = 7    // EFI_VARIABLE_NON_VOLATILE | BOOTSERVICE_ACCESS | RUNTIME_ACCESS
	loadOptionActive   = 1    // LOAD_OPTION_ACTIVE
	devicePathMessage  = 0x03 // MESSAGING_DEVICE_PATH
	devicePathURI      = 0x18 // MSG_URI_DP
	devicePathEnd      = 0x7F // END_DEVICE_PATH_TYPE
	devicePathEndEntry = 0xFF // END_ENTIRE_DEVICE_PATH_SUBTYPE
)

// storedVariable is one variable of a store: where its header is and what it holds.
type storedVariable struct {
	off   int // of its header in the file
	size  int // of its header, name and data
	state byte
	name  string
	guid  [16]byte
	data  []byte // a slice of the store's bytes
}

// live says whether the firmware reads the variable: added, or added and being deleted (which
// counts while no added copy exists, see varStore.find).
func (v storedVariable) live() bool {
	return v.state == varAdded || v.state == varAdded&varInDeletedTrans
}

// varStore is an OVMF variable store file: the firmware volume, its authenticated variable
// store, and the variables in it, oldest first.
type varStore struct {
	data  []byte
	first int // the offset of the first variable's header in the file
	end   int // of the store's region in the file
	free  int // the first byte after the last variable: where the next one goes
	vars  []storedVariable
}

func align4(n int) int { return (n + 3) &^ 3 }

// parseVarStore reads the variable store inside an OVMF firmware volume.
func parseVarStore(data []byte) (*varStore, error) {
	if len(data) < fvHeaderLenOffset+2 || string(data[fvSignatureOffset:fvSignatureOffset+4]) != "_FVH" {
		return nil, errors.New("not a UEFI firmware volume (no _FVH signature)")
	}
	start := int(binary.LittleEndian.Uint16(data[fvHeaderLenOffset:]))
	if start+varStoreHeaderLen > len(data) {
		return nil, fmt.Errorf("firmware volume header length %d runs past the file's %d bytes", start, len(data))
	}
	h := data[start : start+varStoreHeaderLen]
	if [16]byte(h[:16]) != authenticatedVariableStoreGUID {
		return nil, fmt.Errorf("no authenticated variable store at offset %#x (signature %x)", start, h[:16])
	}
	size := int(binary.LittleEndian.Uint32(h[16:]))
	if h[20] != varStoreFormatted || h[21] != varStoreHealthy {
		return nil, fmt.Errorf("variable store not formatted and healthy (format %#x, state %#x)", h[20], h[21])
	}
	s := &varStore{data: data, first: align4(start + varStoreHeaderLen), end: start + size}
	if size < varStoreHeaderLen || s.end > len(data) {
		return nil, fmt.Errorf("variable store of %d bytes at offset %#x does not fit the file's %d bytes", size, start, len(data))
	}
	s.walk()
	return s, nil
}

// walk lists the store's variables and finds its free space, stepping from header to header
// exactly as the firmware does (EDK II's GetNextVariablePtr): a header whose State, NameSize,
// DataSize or Attributes is still erased (all ones) is one the firmware had begun to write
// when QEMU was killed, and counts as a header alone, with no name or data, whatever its sizes
// say. Anything else the firmware would walk differently ends the walk, leaving space that is
// not erased, which the firmware's reclaim (and this package's, see add) clears.
func (s *varStore) walk() {
	data := s.data
	s.vars = nil
	off := s.first
	for off+varHeaderLen <= s.end && binary.LittleEndian.Uint16(data[off:]) == varStartID {
		vh := data[off : off+varHeaderLen]
		attrs := binary.LittleEndian.Uint32(vh[4:])
		nameSize, dataSize := binary.LittleEndian.Uint32(vh[36:]), binary.LittleEndian.Uint32(vh[40:])
		if vh[2] == 0xFF || attrs == ^uint32(0) || nameSize == ^uint32(0) || dataSize == ^uint32(0) {
			nameSize, dataSize = 0, 0
		}
		body := off + varHeaderLen
		if int64(body)+int64(nameSize)+int64(dataSize) > int64(s.end) {
			break
		}
		v := storedVariable{off: off, size: varHeaderLen + int(nameSize) + int(dataSize), state: vh[2], guid: [16]byte(vh[44:60])}
		if nameSize > 0 || dataSize > 0 {
			v.name = decodeUTF16Name(data[body : body+int(nameSize)])
			v.data = data[body+int(nameSize) : body+int(nameSize)+int(dataSize)]
		}
		s.vars = append(s.vars, v)
		off = align4(off + v.size)
	}
	s.free = min(off, s.end)
}

// decodeUTF16Name reads a NUL-terminated UTF-16LE variable name.
func decodeUTF16Name(b []byte) string {
	units := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		u := binary.LittleEndian.Uint16(b[i:])
		if u == 0 {
			break
		}
		units = append(units, u)
	}
	return string(utf16.Decode(units))
}

// find is the variable the firmware reads for name and guid, nil when there is none: the
// added copy, else one being deleted (the firmware's own rule after an interrupted update).
func (s *varStore) find(name string, guid [16]byte) *storedVariable {
	var transition *storedVariable
	for i := range s.vars {
		v := &s.vars[i]
		if v.name != name || v.guid != guid || !v.live() {
			continue
		}
		if v.state == varAdded {
			return v
		}
		transition = v
	}
	return transition
}

// remove marks every live copy of a variable deleted, as the firmware does.
func (s *varStore) remove(name string, guid [16]byte) {
	for i := range s.vars {
		v := &s.vars[i]
		if v.name == name && v.guid == guid && v.live() {
			v.state &= varDeletedMask
			s.data[v.off+2] = v.state
		}
	}
}

// encodeVariable is an AUTHENTICATED_VARIABLE_HEADER with its name and data, for a variable
// without authentication (MonotonicCount, TimeStamp and PubKeyIndex zero).
func encodeVariable(name string, guid [16]byte, attrs uint32, data []byte) []byte {
	units := utf16.Encode([]rune(name + "\x00"))
	v := make([]byte, varHeaderLen, varHeaderLen+2*len(units)+len(data))
	binary.LittleEndian.PutUint16(v[0:], varStartID)
	v[2] = varAdded
	binary.LittleEndian.PutUint32(v[4:], attrs)
	binary.LittleEndian.PutUint32(v[36:], uint32(2*len(units)))
	binary.LittleEndian.PutUint32(v[40:], uint32(len(data)))
	copy(v[44:60], guid[:])
	for _, u := range units {
		v = binary.LittleEndian.AppendUint16(v, u)
	}
	return append(v, data...)
}

// erased says whether the store is all ones (erased flash) from its free offset for n bytes.
func (s *varStore) erased(n int) bool {
	if s.free+n > s.end {
		return false
	}
	for _, b := range s.data[s.free : s.free+n] {
		if b != 0xFF {
			return false
		}
	}
	return true
}

// reclaim rewrites the store as the firmware's own reclaim does: the added variables in
// order, then those being deleted that have no added copy (as added), then erased space. It
// drops deleted variables and a variable the firmware had not finished writing when QEMU was
// killed (a header whose sizes are still erased, or whose state never reached added), which
// leaves the space after the last variable not erased.
func (s *varStore) reclaim() {
	region := make([]byte, s.end-s.first)
	for i := range region {
		region[i] = 0xFF
	}
	off := 0
	put := func(v storedVariable, state byte) {
		off = align4(off)
		copy(region[off:], s.data[v.off:v.off+v.size])
		region[off+2] = state
		off += v.size
	}
	added := map[string]bool{}
	for _, v := range s.vars {
		if v.state == varAdded {
			put(v, varAdded)
			added[v.name+"\x00"+string(v.guid[:])] = true
		}
	}
	for _, v := range s.vars {
		if v.state == varAdded&varInDeletedTrans && !added[v.name+"\x00"+string(v.guid[:])] {
			put(v, varAdded)
		}
	}
	copy(s.data[s.first:s.end], region)
	s.walk()
}

// add writes variables after the last one, each header 4-byte aligned, into the erased space,
// reclaiming the store first when that space is short or not erased.
func (s *varStore) add(vars ...[]byte) error {
	need := 0
	for _, v := range vars {
		need = align4(need) + len(v)
	}
	if !s.erased(need) {
		s.reclaim()
	}
	if s.free+need > s.end {
		return fmt.Errorf("the variable store has no room: %d bytes free, %d needed", s.end-s.free, need)
	}
	if !s.erased(need) {
		return fmt.Errorf("the variable store's free space at offset %#x is not erased", s.free)
	}
	off := s.free
	for _, v := range vars {
		off = align4(off)
		copy(s.data[off:], v)
		off += len(v)
	}
	s.free = off
	return nil
}

// httpBootLoadOption is the EFI_LOAD_OPTION of a boot by URI: active, described, and a
// device path that is a short-form URI node alone, which the firmware's boot manager expands
// to the NICs that can do HTTP boot.
func httpBootLoadOption(uri string) []byte {
	node := []byte{devicePathMessage, devicePathURI, 0, 0}
	binary.LittleEndian.PutUint16(node[2:], uint16(4+len(uri)))
	node = append(node, uri...)
	path := append(node, devicePathEnd, devicePathEndEntry, 4, 0)
	opt := binary.LittleEndian.AppendUint32(nil, loadOptionActive)
	opt = binary.LittleEndian.AppendUint16(opt, uint16(len(path)))
	for _, u := range utf16.Encode([]rune(httpBootDescription + "\x00")) {
		opt = binary.LittleEndian.AppendUint16(opt, u)
	}
	return append(opt, path...)
}

// maxBootURI keeps a boot option within what OVMF accepts as one variable (its
// PcdMaxVariableSize is 8 KiB in the 2 MB build).
const maxBootURI = 4096

// checkBootURI accepts what firmware can fetch: an absolute http or https URL.
func checkBootURI(uri string) error {
	u, err := url.Parse(uri)
	if err != nil || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) || u.Host == "" {
		return errors.New("the boot URI must be an absolute http or https URL")
	}
	if len(uri) > maxBootURI {
		return fmt.Errorf("the boot URI has %d bytes, more than %d", len(uri), maxBootURI)
	}
	return nil
}

// SetHTTPBootNext makes the firmware of an OVMF variable store boot uri by UEFI HTTP boot at
// its next start, once, as a BMC does for Redfish's UefiHttp with HttpBootUri: it adds
// Boot0F00 ("Ironfleet HTTP boot"), a boot option whose device path is the URI, and BootNext
// naming it, after marking any live copies of both deleted. The firmware deletes BootNext as
// it boots it, and falls back to its BootOrder when the boot fails. QEMU must not be running:
// it holds the store as the machine's flash. When the store is full, or QEMU was killed while
// the firmware was writing a variable, the store is first reclaimed as the firmware would
// (reclaim); a store without room even then fails. The URI is not put in the error messages:
// it is a bearer secret.
func SetHTTPBootNext(varsFile, uri string) error {
	if err := checkBootURI(uri); err != nil {
		return fmt.Errorf("%s: %w", varsFile, err)
	}
	data, err := os.ReadFile(varsFile)
	if err != nil {
		return err
	}
	s, err := parseVarStore(data)
	if err != nil {
		return fmt.Errorf("%s: %w", varsFile, err)
	}
	option := fmt.Sprintf("Boot%04X", httpBootOption)
	s.remove(option, efiGlobalVariableGUID)
	s.remove("BootNext", efiGlobalVariableGUID)
	next := binary.LittleEndian.AppendUint16(nil, httpBootOption)
	if err := s.add(
		encodeVariable(option, efiGlobalVariableGUID, efiVariableNVBSRT, httpBootLoadOption(uri)),
		encodeVariable("BootNext", efiGlobalVariableGUID, efiVariableNVBSRT, next),
	); err != nil {
		return fmt.Errorf("%s: %w", varsFile, err)
	}
	return replaceFile(varsFile, s.data)
}

// replaceFile writes data to path through a temporary file renamed over it, keeping its mode,
// so a crash leaves the old store or the new one, never half of each.
func replaceFile(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(st.Mode().Perm()), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// HTTPBootNext reads an OVMF variable store: the URI the firmware boots next when its live
// BootNext names a boot option whose device path has a URI node (SetHTTPBootNext's, or one
// the firmware's HTTP boot setup made); "" when there is no BootNext or it names another kind
// of boot option.
func HTTPBootNext(varsFile string) (string, error) {
	data, err := os.ReadFile(varsFile)
	if err != nil {
		return "", err
	}
	s, err := parseVarStore(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", varsFile, err)
	}
	next := s.find("BootNext", efiGlobalVariableGUID)
	if next == nil {
		return "", nil
	}
	if len(next.data) != 2 {
		return "", fmt.Errorf("%s: BootNext has %d bytes, not 2", varsFile, len(next.data))
	}
	name := fmt.Sprintf("Boot%04X", binary.LittleEndian.Uint16(next.data))
	option := s.find(name, efiGlobalVariableGUID)
	if option == nil {
		return "", fmt.Errorf("%s: BootNext names %s, which does not exist", varsFile, name)
	}
	uri, err := loadOptionURI(option.data)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", varsFile, name, err)
	}
	return uri, nil
}

// loadOptionURI is the URI node's URI in an EFI_LOAD_OPTION's device path, "" without one.
func loadOptionURI(opt []byte) (string, error) {
	if len(opt) < 6 {
		return "", fmt.Errorf("load option of %d bytes", len(opt))
	}
	pathLen := int(binary.LittleEndian.Uint16(opt[4:]))
	i := 6 // the description, up to and past its NUL
	for i+1 < len(opt) && binary.LittleEndian.Uint16(opt[i:]) != 0 {
		i += 2
	}
	i += 2
	if i+pathLen > len(opt) {
		return "", errors.New("its device path runs past its data")
	}
	path := opt[i : i+pathLen]
	for len(path) >= 4 {
		typ, sub, n := path[0], path[1], int(binary.LittleEndian.Uint16(path[2:]))
		if n < 4 || n > len(path) {
			return "", fmt.Errorf("device path node of length %d", n)
		}
		switch {
		case typ == devicePathEnd && sub == devicePathEndEntry:
			return "", nil
		case typ == devicePathMessage && sub == devicePathURI:
			return string(path[4:n]), nil
		}
		path = path[n:]
	}
	return "", nil
}
