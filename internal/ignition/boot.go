package ignition

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The network-boot contract between Ironfleet's boot service and the probe's /init. The boot
// service's iPXE script boots the probe kernel with these kernel arguments; /init reads them
// from /proc/cmdline. Nothing on the command line is a secret: the script goes to anyone who
// knows a MAC.
const (
	// KernelArgIgnition is where /init GETs its ignition once:
	// http://<host>:<port>/ignition/<boot id>. The boot id only names the boot; the boot service
	// serves its ignition once, to the host the boot is bound to, and a second fetch ends the
	// boot. The ignition it serves carries the boot URL (Config.BootURL).
	KernelArgIgnition = "ironfleet.ignition"
	// KernelArgBootIf names the NIC the host booted from, as pxelinux spells it:
	// BOOTIF=01-aa-bb-cc-dd-ee-ff (iPXE: ${net0/mac:hexhyp}). /init brings that NIC up with DHCP.
	KernelArgBootIf = "BOOTIF"

	// IgnitionPathPrefix, followed by the boot id, serves the rendered Config (SecretKey's
	// bytes, with BootURL added).
	IgnitionPathPrefix = "/ignition/"
	// ProgressPath, under the boot URL (http://<host>:<port>/boot/<boot token>: unguessable, a
	// secret, dead once the boot configuration is no longer Ready), takes a Progress as JSON
	// (POST, at most 4 KiB).
	ProgressPath = "/progress"
	// MaxProgressBytes bounds a Progress body.
	MaxProgressBytes = 4 << 10
)

// The virtual-media contract: a boot from the per-boot ISO (internal/bootmedia) has no
// command line from the boot service and no network to fetch the ignition over. Its second
// initrd, which the ISO's boot loaders load after the probe's initramfs, adds these files to
// the root filesystem; /init reads them instead of fetching KernelArgIgnition.
const (
	// MediaIgnitionFile holds the boot's rendered ignition (SecretKey's bytes), mode 0600.
	MediaIgnitionFile = "/ironfleet/ignition.json"
	// MediaBootURLFile holds the boot URL (Config.BootURL), where /init reports progress.
	MediaBootURLFile = "/ironfleet/boot-url"
	// MediaConsoleLine is what /init prints on the console when it boots from these files.
	MediaConsoleLine = "ironfleet-init: ignition from the boot media"
)

// Stage is how far a probe boot has got, as /init reports it to the boot service (and prints
// it on the console as "ironfleet-init: stage=<Stage> <message>", which the lab reads).
type Stage string

// Stages in the order a boot passes them; Failed and RegistryUnreachable can come at any point
// after NetworkUp.
const (
	StageInitStarted         Stage = "InitStarted"
	StageNetworkUp           Stage = "NetworkUp"
	StageIgnitionFetched     Stage = "IgnitionFetched"
	StageProbeRunning        Stage = "ProbeRunning"
	StageRegistryUnreachable Stage = "RegistryUnreachable"
	StageReported            Stage = "Reported"
	StageFailed              Stage = "Failed"
)

// ConsolePrefix starts every line /init prints about its stage.
const ConsolePrefix = "ironfleet-init: stage="

// Progress is one report of a boot's stage.
type Progress struct {
	Stage   Stage  `json:"stage"`
	Message string `json:"message,omitempty"`
}

var stagePattern = regexp.MustCompile(`^[A-Z][A-Za-z]{0,31}$`)

// Validate checks a Progress from the network: a CamelCase stage, a message of at most 1 KiB
// of valid UTF-8.
func (p Progress) Validate() error {
	if !stagePattern.MatchString(string(p.Stage)) {
		return fmt.Errorf("stage %q is not a CamelCase word", truncate(string(p.Stage), 32))
	}
	if len(p.Message) > 1024 {
		return errors.New("message is longer than 1024 bytes")
	}
	if !utf8.ValidString(p.Message) {
		return errors.New("message is not valid UTF-8")
	}
	return nil
}

// ConsoleLine is how /init prints a stage on the console.
func (p Progress) ConsoleLine() string {
	return ConsolePrefix + string(p.Stage) + " " + p.Message
}

// ParseConsoleLine reads a stage back from a console line ("" when the line has none).
func ParseConsoleLine(line string) (Stage, string) {
	_, rest, ok := strings.Cut(line, ConsolePrefix)
	if !ok {
		return "", ""
	}
	stage, msg, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if !stagePattern.MatchString(stage) {
		return "", ""
	}
	return Stage(stage), msg
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
