package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// mediaRoot is a root filesystem as the boot media's second initrd leaves it: the ignition
// and, unless bootURL is "", the boot URL.
func mediaRoot(t *testing.T, ign, bootURL string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(ignition.MediaIgnitionFile)), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, ignition.MediaIgnitionFile), []byte(ign), 0o600))
	if bootURL != "" {
		require.NoError(t, os.WriteFile(filepath.Join(root, ignition.MediaBootURLFile), []byte(bootURL), 0o644))
	}
	return root
}

const mediaIgnition = `{"registryURL": "https://10.0.2.101", "token": "s3cr3t", "mode": "discovery",
 "network": {"interfaceMAC": "52:54:00:AB:CD:EF", "vlanID": 42, "address": "10.0.0.21/24", "gateway": "10.0.0.1", "dns": ["10.0.0.2"]}}`

func TestBootSourceFromTheCommandLine(t *testing.T) {
	src, err := readBootSource(t.TempDir(), "console=ttyS0 ironfleet.ignition=http://10.0.0.1:8080/ignition/b00t1d BOOTIF=01-52-54-00-00-00-01")
	require.NoError(t, err)
	assert.False(t, src.media)
	assert.Equal(t, "http://10.0.0.1:8080/ignition/b00t1d", src.ignitionURL)
	assert.Empty(t, src.base, "the boot URL comes with the ignition")
	assert.Equal(t, "52:54:00:00:00:01", src.bootIf.String())

	src, err = readBootSource(t.TempDir(), "console=ttyS0")
	assert.ErrorContains(t, err, "no ironfleet.ignition=", "a network boot without the media needs the command line")
	assert.False(t, src.media)
}

func TestBootSourceFromTheMedia(t *testing.T) {
	root := mediaRoot(t, mediaIgnition, "http://192.0.2.10:8080/boot/tok3n/\n")
	src, err := readBootSource(root, "BOOT_IMAGE=/VMLINUZ console=ttyS0,115200 quiet")
	require.NoError(t, err, "neither ironfleet.ignition nor BOOTIF is needed")
	assert.True(t, src.media)
	assert.Equal(t, "http://192.0.2.10:8080/boot/tok3n", src.base, "trailing newline and slash trimmed")
	assert.Nil(t, src.bootIf)

	src, err = readBootSource(root, "ironfleet.ignition=http://10.9.9.9/ignition/other BOOTIF=01-52-54-00-00-00-01")
	require.NoError(t, err)
	assert.Equal(t, "http://192.0.2.10:8080/boot/tok3n", src.base, "the media's boot URL wins over a command line's")
	assert.Equal(t, "52:54:00:00:00:01", src.bootIf.String(), "BOOTIF still names the NIC if a loader sets one")
}

func TestBootSourceFromTheMediaErrors(t *testing.T) {
	for name, tc := range map[string]struct{ bootURL, cmdline, want string }{
		"no boot URL":      {"", "", "has /ironfleet/ignition.json but no /ironfleet/boot-url"},
		"empty boot URL":   {" \n", "", "/ironfleet/boot-url is empty"},
		"ftp boot URL":     {"ftp://h/boot/s3cr3t", "", "the boot media's /ironfleet/boot-url: ftp://h/boot/… is not an http(s) URL"},
		"relative":         {"/boot/s3cr3t", "", "is not an http(s) URL"},
		"two lines":        {"http://h/boot/s3cr3t\nhttp://i/boot/s3cr3t", "", "is not an http(s) URL"},
		"malformed BOOTIF": {"http://h/boot/s3cr3t", "BOOTIF=06-aa-bb-cc-dd-ee-ff", "Ethernet"},
	} {
		t.Run(name, func(t *testing.T) {
			root := mediaRoot(t, mediaIgnition, "")
			if tc.bootURL != "" {
				require.NoError(t, os.WriteFile(filepath.Join(root, ignition.MediaBootURLFile), []byte(tc.bootURL), 0o644))
			}
			src, err := readBootSource(root, tc.cmdline)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
			assert.True(t, src.media)
		})
	}
}

// consoleLines splits what /init printed.
func consoleLines(b *bytes.Buffer) []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

func TestStartBootFromTheMedia(t *testing.T) {
	var console bytes.Buffer
	root := mediaRoot(t, mediaIgnition, "http://192.0.2.10:8080/boot/tok3n")
	src, rep, err := startBoot(root, "console=ttyS0", &console)
	require.NoError(t, err)
	require.NotNil(t, rep)
	lines := consoleLines(&console)
	require.Len(t, lines, 2)
	assert.Equal(t, ignition.MediaConsoleLine, lines[0], "exactly the contract's line, alone")
	stage, msg := ignition.ParseConsoleLine(lines[1])
	assert.Equal(t, ignition.StageInitStarted, stage)
	assert.Contains(t, msg, "boot service http://192.0.2.10:8080/boot/…, ignition from the boot media")
	assert.NotContains(t, console.String(), "tok3n")
	assert.NotContains(t, console.String(), "s3cr3t")
	assert.Equal(t, mediaIgnition, string(src.data), "written for metalprobe as it came")
	assert.Equal(t, ignition.ModeDiscovery, src.cfg.Mode)
	assert.Equal(t, &metalv1alpha1.ProbeNetwork{InterfaceMAC: "52:54:00:ab:cd:ef", VLANID: 42, Address: "10.0.0.21/24",
		Gateway: "10.0.0.1", DNS: []string{"10.0.0.2"}}, src.cfg.Network)
}

func TestStartBootFromTheCommandLineSaysNothingOfMedia(t *testing.T) {
	var console bytes.Buffer
	src, _, err := startBoot(t.TempDir(), "ironfleet.ignition=http://10.0.0.1:8080/ignition/b00t1d", &console)
	require.NoError(t, err)
	assert.False(t, src.media)
	assert.Nil(t, src.data, "fetched later, once the network is up")
	assert.NotContains(t, console.String(), ignition.MediaConsoleLine)
	stage, msg := ignition.ParseConsoleLine(consoleLines(&console)[0])
	assert.Equal(t, ignition.StageInitStarted, stage)
	assert.NotContains(t, msg, "media")
}

func TestStartBootRefusesABadMediaIgnition(t *testing.T) {
	for name, tc := range map[string]struct{ ign, want string }{
		"malformed":       {"{\"token\": \"s3cr3t\",\n \"mode\": discovery}", "the boot media's ignition /ironfleet/ignition.json: parsing ignition: malformed JSON at line 2, column"},
		"empty":           {"", "the boot media's ignition /ironfleet/ignition.json: parsing ignition: empty file"},
		"incomplete":      {`{"registryURL": "https://r", "mode": "discovery"}`, "parsing ignition: token is required"},
		"bad network":     {strings.Replace(mediaIgnition, `"gateway": "10.0.0.1"`, `"gateway": "10.0.1.1"`, 1), "network.gateway 10.0.1.1 is not in network.address's subnet 10.0.0.0/24"},
		"network no addr": {`{"registryURL": "https://r", "token": "s3cr3t", "mode": "discovery", "network": {"gateway": "10.0.0.1"}}`, "network.address is required"},
		"too large":       {`{"token": "` + strings.Repeat("x", ignition.MaxIgnitionBytes) + `"}`, "the boot media's ignition /ironfleet/ignition.json: larger than 1048576 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			var console bytes.Buffer
			root := mediaRoot(t, tc.ign, "http://192.0.2.10:8080/boot/tok3n")
			_, rep, err := startBoot(root, "", &console)
			require.Error(t, err)
			require.NotNil(t, rep, "the boot URL is known: the failure is held for it")
			lines := consoleLines(&console)
			require.Len(t, lines, 3)
			assert.Equal(t, ignition.MediaConsoleLine, lines[0])
			stage, msg := ignition.ParseConsoleLine(lines[2])
			assert.Equal(t, ignition.StageFailed, stage)
			assert.Contains(t, msg, tc.want)
			assert.NotContains(t, console.String(), "s3cr3t")
			assert.NotContains(t, console.String(), "tok3n")
		})
	}
}

func TestStartBootWithoutABootURLFailsOnTheConsole(t *testing.T) {
	var console bytes.Buffer
	_, rep, err := startBoot(mediaRoot(t, mediaIgnition, ""), "", &console)
	require.Error(t, err)
	assert.Nil(t, rep)
	lines := consoleLines(&console)
	require.Len(t, lines, 2)
	assert.Equal(t, ignition.MediaConsoleLine, lines[0])
	stage, msg := ignition.ParseConsoleLine(lines[1])
	assert.Equal(t, ignition.StageFailed, stage)
	assert.Contains(t, msg, "no /ironfleet/boot-url")
}

func TestVLANLinkName(t *testing.T) {
	assert.Equal(t, "eth0.42", vlanLinkName("eth0", 42))
	assert.Equal(t, "enp1s0f1.4094", vlanLinkName("enp1s0f1", 4094))
	assert.Equal(t, "vlan4094", vlanLinkName("enp129s0f1np1", 4094), "IFNAMSIZ: at most 15 bytes")
}

func TestParseNetworkMAC(t *testing.T) {
	mac, err := parseNetworkMAC(&metalv1alpha1.ProbeNetwork{InterfaceMAC: "52:54:00:ab:cd:ef"})
	require.NoError(t, err)
	assert.Equal(t, "52:54:00:ab:cd:ef", mac.String())
	mac, err = parseNetworkMAC(&metalv1alpha1.ProbeNetwork{})
	require.NoError(t, err)
	assert.Nil(t, mac)
	mac, err = parseNetworkMAC(nil)
	require.NoError(t, err)
	assert.Nil(t, mac)
}
