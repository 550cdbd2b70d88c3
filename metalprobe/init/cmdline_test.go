package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCmdline(t *testing.T) {
	args, err := parseCmdline("BOOT_IMAGE=vmlinuz console=ttyS0 ironfleet.ignition=http://10.0.0.1:8080/ignition/b00t1d BOOTIF=01-AA-bb-cc-dd-ee-0f quiet\n")
	require.NoError(t, err)
	assert.Equal(t, "http://10.0.0.1:8080/ignition/b00t1d", args.ignitionURL)
	assert.Empty(t, args.base, "the boot URL comes with the ignition")
	assert.Equal(t, "aa:bb:cc:dd:ee:0f", args.bootIf.String())

	args, err = parseCmdline("ironfleet.ignition=http://boot.example/ignition/x")
	require.NoError(t, err)
	assert.Nil(t, args.bootIf, "BOOTIF is optional")
}

func TestParseCmdlineErrorsNeverQuoteTheToken(t *testing.T) {
	for cmdline, want := range map[string]string{
		"console=ttyS0":                              "no ironfleet.ignition=",
		"ironfleet.boot=http://h/boot/s3cr3t":        "no ironfleet.ignition=", // an older boot service's
		"ironfleet.ignition=ftp://h/ignition/s3cr3t": "ironfleet.ignition: ftp://h/ignition/…",
		"ironfleet.ignition=http://h/ignition/s3cr3t BOOTIF=06-aa-bb-cc-dd-ee-ff": "Ethernet",
		"ironfleet.ignition=http://h/ignition/s3cr3t BOOTIF=01-aa-bb-cc-dd-ee":    "not a MAC",
		"ironfleet.ignition=http://h/ignition/s3cr3t BOOTIF=aabbccddeeff":         "want 01-",
	} {
		_, err := parseCmdline(cmdline)
		require.Error(t, err, cmdline)
		assert.Contains(t, err.Error(), want, cmdline)
		assert.NotContains(t, err.Error(), "s3cr3t")
	}
}

func TestRedactedURL(t *testing.T) {
	assert.Equal(t, "http://10.0.0.1:8080/boot/…", redactedURL("http://10.0.0.1:8080/boot/tok3n"))
	assert.Equal(t, "http://10.0.0.1:8080/boot/…", redactedURL("http://u:p@10.0.0.1:8080/boot/tok3n?x=y"))
	assert.Equal(t, "(unparseable URL)", redactedURL("%%"))
}
