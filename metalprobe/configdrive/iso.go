package configdrive

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// Versions are the openstack/ directories written; Read uses the first.
var versions = []string{"latest", "2012-08-10"}

const (
	isoBlock = 2048
	// pvdOffset is where an ISO9660 primary volume descriptor is (sector 16).
	pvdOffset = 16 * isoBlock
)

// metaData is openstack/<version>/meta_data.json, the fields Nova and Ironic write that the
// consumers need.
type metaData struct {
	UUID             string            `json:"uuid"`
	Hostname         string            `json:"hostname"`
	Name             string            `json:"name"`
	LaunchIndex      int               `json:"launch_index"`
	AvailabilityZone string            `json:"availability_zone"`
	Files            []any             `json:"files"`
	PublicKeys       map[string]string `json:"public_keys"`
	Meta             map[string]string `json:"meta"`
}

func metaDataJSON(f Files) ([]byte, error) {
	meta := map[string]string{}
	if f.Server != "" {
		meta["server"] = f.Server
	}
	return json.Marshal(metaData{
		UUID:       f.InstanceID,
		Hostname:   f.Hostname,
		Name:       f.Hostname,
		Files:      []any{},
		PublicKeys: map[string]string{},
		Meta:       meta,
	})
}

func checkFiles(f Files) error {
	// Two copies of user_data must fit in the largest partition; say so before building.
	if n := int64(len(f.UserData)) * int64(len(versions)); n > MaxPartitionSize {
		return fmt.Errorf("user data of %d bytes does not fit in a config drive of at most %d bytes (it is written %d times)",
			len(f.UserData), MaxPartitionSize, len(versions))
	}
	return nil
}

// buildISO makes the config drive's ISO9660 image in a temporary workspace and returns its
// bytes, exactly the volume's size (a multiple of 2048).
func buildISO(f Files) (iso []byte, err error) {
	meta, err := metaDataJSON(f)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "configdrive-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); err == nil && rerr != nil {
			err = rerr
		}
	}()
	// Finalize removes the workspace: keep it apart from the image file.
	ws := filepath.Join(tmp, "root")
	for _, v := range versions {
		dir := filepath.Join(ws, "openstack", v)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(dir, "meta_data.json"), meta); err != nil {
			return nil, err
		}
		if f.UserData != nil {
			if err := writeFile(filepath.Join(dir, "user_data"), f.UserData); err != nil {
				return nil, err
			}
		}
	}
	// Rock Ridge records the mode of the workspace's directories: make it independent of umask.
	if err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o755)
	}); err != nil {
		return nil, err
	}

	isoPath := filepath.Join(tmp, "config-2.iso")
	out, err := os.OpenFile(isoPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	isofs, err := iso9660.Create(file.New(out, false), 0, 0, isoBlock, ws)
	if err != nil {
		return nil, err
	}
	if err := isofs.Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: Label}); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(isoPath)
	if err != nil {
		return nil, err
	}
	size, err := isoVolumeSize(b)
	if err != nil {
		return nil, fmt.Errorf("the ISO9660 image go-diskfs made: %w", err)
	}
	padPVD(b[pvdOffset : pvdOffset+isoBlock])
	switch {
	case int64(len(b)) > size:
		// go-diskfs may pad the last file with a block past the volume.
		b = b[:size]
	case int64(len(b)) < size:
		b = append(b, make([]byte, size-int64(len(b)))...)
	}
	return b, nil
}

// padPVD makes the primary volume descriptor go-diskfs wrote look like mkisofs's: its
// identifier fields padded with spaces as ECMA-119 wants (go-diskfs pads them with NULs),
// and no expiration and effective dates (go-diskfs sets them to now).
func padPVD(pvd []byte) {
	for _, r := range [][2]int{
		{8, 40}, {40, 72}, // system, volume identifier
		{190, 318}, {318, 446}, {446, 574}, {574, 702}, // volume set, publisher, preparer, application
		{702, 739}, {739, 776}, {776, 813}, // copyright, abstract, bibliographic file
	} {
		for i := r[0]; i < r[1]; i++ {
			if pvd[i] == 0 {
				pvd[i] = ' '
			}
		}
	}
	for _, off := range []int{847, 864} { // expiration, effective: "not specified"
		copy(pvd[off:off+16], "0000000000000000")
		pvd[off+16] = 0
	}
}

func writeFile(name string, data []byte) error {
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return err
	}
	return os.Chmod(name, 0o644)
}

// isoVolumeSize is the size in bytes its primary volume descriptor gives an ISO9660 image.
func isoVolumeSize(b []byte) (int64, error) {
	if len(b) < pvdOffset+isoBlock || !isPVD(b[pvdOffset:pvdOffset+isoBlock]) {
		return 0, errors.New("no ISO9660 primary volume descriptor")
	}
	pvd := b[pvdOffset:]
	blocks := int64(binary.LittleEndian.Uint32(pvd[80:84]))
	blockSize := int64(binary.LittleEndian.Uint16(pvd[128:130]))
	return blocks * blockSize, nil
}

// isPVD says whether a 2048-byte sector is an ISO9660 primary volume descriptor.
func isPVD(b []byte) bool {
	return len(b) >= isoBlock && b[0] == 1 && string(b[1:6]) == "CD001" && b[6] == 1
}

// pvdVolumeID is the volume identifier of a primary volume descriptor.
func pvdVolumeID(b []byte) string {
	return strings.TrimRight(string(b[40:72]), " \x00")
}

// readISO reads the config drive's files from the ISO9660 filesystem at [start, start+size)
// of dev.
func readISO(dev *os.File, start, size int64) (Files, error) {
	sub := backend.Sub(file.New(dev, true), start, size)
	isofs, err := iso9660.Read(sub, size, 0, isoBlock)
	if err != nil {
		return Files{}, err
	}
	dir := "openstack/" + versions[0]
	meta, err := isofs.ReadFile(dir + "/meta_data.json")
	if err != nil {
		return Files{}, err
	}
	var md metaData
	if err := json.Unmarshal(meta, &md); err != nil {
		return Files{}, fmt.Errorf("%s/meta_data.json: %w", dir, err)
	}
	out := Files{InstanceID: md.UUID, Hostname: md.Hostname, Server: md.Meta["server"]}
	if out.Hostname == "" {
		out.Hostname = md.Name
	}
	ud, err := isofs.Open(dir + "/user_data")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return out, nil
	case err != nil:
		return Files{}, err
	}
	defer ud.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, ud); err != nil {
		return Files{}, fmt.Errorf("%s/user_data: %w", dir, err)
	}
	out.UserData = buf.Bytes()
	if out.UserData == nil {
		out.UserData = []byte{}
	}
	return out, nil
}
