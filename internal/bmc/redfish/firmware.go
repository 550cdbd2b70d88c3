package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// maxFirmwareMembers bounds the FirmwareInventory a BMC may list, each member read: a large
// Dell lists a hundred or so (every drive, NIC port and PSU, each installed and previous).
const maxFirmwareMembers = 1024

// FirmwareInventory lists the FirmwareInventory members that matter to the system: all of them
// but those that link only to another of the BMC's systems (or resources under it). Each is
// classified (classifyFirmware) from what it links to, then from the vendor's well-known Ids.
// Any member failing to read fails the call: an inventory with a hole would read as firmware
// that is not there. A BMC without an UpdateService or FirmwareInventory answers ErrUnsupported.
func (c *Client) FirmwareInventory(ctx context.Context, systemURI string) ([]bmc.FirmwareComponent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.root.updateService == "" {
		return nil, unsupported("the BMC links no UpdateService: it has no firmware inventory")
	}
	us, err := redfish.GetUpdateService(c.api, c.root.updateService)
	if err != nil {
		return nil, classify("reading the UpdateService "+c.root.updateService, err)
	}
	inventory := privateLink(us, "firmwareInventory")
	if inventory == "" {
		return nil, unsupported("the BMC's UpdateService links no FirmwareInventory")
	}
	// The system's BiosVersion tells its BIOS among the members that link to it.
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return nil, classify("reading system "+systemURI, err)
	}
	links, err := c.memberLinks(inventory, maxFirmwareMembers)
	var tooMany *tooManyMembers
	var failed *pageError
	switch {
	case errors.As(err, &tooMany):
		return nil, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "the FirmwareInventory %s lists %s, more than the %d read", inventory, tooMany.count("members"), maxFirmwareMembers)
	case errors.As(err, &failed):
		return nil, classify("listing the firmware inventory: reading "+failed.page, failed.err)
	case err != nil:
		return nil, classify("listing the firmware inventory "+inventory, err)
	}
	members, err := common.GetObjects[redfish.SoftwareInventory](c.api, links)
	if err != nil {
		return nil, classify("reading the firmware inventory "+inventory, err)
	}
	here := []string{systemURI, system.ODataID}
	out := make([]bmc.FirmwareComponent, 0, len(members))
	for _, m := range members {
		// gofish v0.20 keeps RelatedItem unexported, as it does the links privateLink reads.
		related := privateLinks(m, "relatedItem")
		if belongsElsewhere(related, here) {
			continue
		}
		out = append(out, bmc.FirmwareComponent{
			ID:         m.ID,
			URI:        m.ODataID,
			Name:       strings.TrimSpace(m.Name),
			Version:    strings.TrimSpace(m.Version),
			Updateable: m.Updateable,
			Class: classifyFirmware(firmwareFacts{
				id: m.ID, name: m.Name, version: m.Version, related: related, biosVersion: system.BIOSVersion,
			}),
			RelatedItems: related,
			Installed:    installed(m.ID),
		})
	}
	// gofish reads members concurrently: an inventory that reorders itself on every read would
	// look changed to whoever compares it.
	slices.SortFunc(out, func(a, b bmc.FirmwareComponent) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// unsupported wraps bmc.ErrUnsupported with what the BMC lacks.
func unsupported(format string, args ...any) error {
	return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), bmc.ErrUnsupported))
}

// firmwareFacts are what classifyFirmware reads of a member, and the BiosVersion of the system
// it is read for.
type firmwareFacts struct {
	id, name, version string
	related           []string
	biosVersion       string
}

// dellInventoryID is an iDRAC member Id: <state>-<component>-<version>[__<FQDD>], the component
// a number of Dell's catalogue.
var dellInventoryID = regexp.MustCompile(`(?i)^(installed|current|previous|available)-(\d+)-`)

// Dell's catalogue numbers of the BIOS and the iDRAC.
const (
	dellComponentBIOS  = "159"
	dellComponentIDRAC = "25227"
)

// classifyFirmware says what a member is the firmware of. What it links to decides first: the
// system's Bios resource, or a System when the member says BIOS, UEFI, "System ROM" or
// "System firmware" in its Id or Name, or carries the System's BiosVersion, is the BIOS (a
// System link of anything else, a NIC or a drive, is Other); a Manager is the BMC. A member
// whose links decide nothing is known by the vendor's Ids: Dell's component numbers (159 the
// BIOS, 25227 the iDRAC), Supermicro's (and DMTF's mockups') "BIOS" and "BMC"; and, linking
// nothing at all, by its Id's or Name's words. Anything else is Other.
func classifyFirmware(f firmwareFacts) bmc.ComponentClass {
	kinds := map[string]bool{}
	for _, link := range f.related {
		kinds[linkKind(link)] = true
	}
	component := ""
	if m := dellInventoryID.FindStringSubmatch(f.id); m != nil {
		component = m[2]
	}
	biosID := component == dellComponentBIOS || strings.EqualFold(f.id, "BIOS")
	bmcID := component == dellComponentIDRAC || strings.EqualFold(f.id, "BMC")
	saysBIOS := hasWord(f.id+" "+f.name, "bios", "uefi", "system rom", "system firmware")
	switch {
	case kinds["bios"]:
		return bmc.ComponentBIOS
	case kinds["manager"]:
		return bmc.ComponentBMC
	case kinds["system"]:
		if biosID || saysBIOS || sameVersion(f.version, f.biosVersion) {
			return bmc.ComponentBIOS
		}
		return bmc.ComponentOther
	case bmcID:
		return bmc.ComponentBMC
	case biosID:
		return bmc.ComponentBIOS
	case len(f.related) > 0:
		return bmc.ComponentOther
	case saysBIOS:
		return bmc.ComponentBIOS
	case hasWord(f.id+" "+f.name, "bmc", "idrac", "ilo", "integrated dell remote access controller", "xclarity controller"):
		return bmc.ComponentBMC
	}
	return bmc.ComponentOther
}

// wordsOf splits text into lower-case words of letters and digits: "BIOS.Setup.1-1" is bios,
// setup, 1, 1; "bios_active" bios, active.
func wordsOf(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	})
}

// hasWord says whether text holds one of the words or phrases, as whole words.
func hasWord(text string, words ...string) bool {
	padded := " " + strings.Join(wordsOf(text), " ") + " "
	for _, w := range words {
		if strings.Contains(padded, " "+w+" ") {
			return true
		}
	}
	return false
}

// sameVersion says whether a member's version is the system's BiosVersion, which some BMCs
// follow with the release date: "P79 v1.45" is "P79 v1.45 (12/06/2017)".
func sameVersion(version, biosVersion string) bool {
	version, biosVersion = strings.TrimSpace(version), strings.TrimSpace(biosVersion)
	return version != "" && (version == biosVersion || strings.HasPrefix(biosVersion, version+" "))
}

// installed is false for the members that are not the running firmware: Dell's Previous-
// (the image a rollback would restore) and Available- (staged, not yet applied).
func installed(id string) bool {
	m := dellInventoryID.FindStringSubmatch(id)
	return m == nil || !(strings.EqualFold(m[1], "previous") || strings.EqualFold(m[1], "available"))
}

// linkSegments is a link's path below /redfish/v1, lower-cased, without empty segments: BMCs
// vary a link's case and trailing slash, and some give absolute URLs.
func linkSegments(link string) []string {
	if u, err := url.Parse(link); err == nil && u.Path != "" {
		link = u.Path
	}
	var segs []string
	for s := range strings.SplitSeq(strings.ToLower(link), "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	if len(segs) >= 2 && segs[0] == "redfish" && segs[1] == "v1" {
		segs = segs[2:]
	}
	return segs
}

// linkKind names what a link is, for classifyFirmware: "system" (a ComputerSystem), "bios" (its
// Bios resource), "manager" (a Manager), or "" (anything else, under a System or not).
func linkKind(link string) string {
	segs := linkSegments(link)
	switch {
	case len(segs) == 2 && segs[0] == "systems":
		return "system"
	case len(segs) == 3 && segs[0] == "systems" && segs[2] == "bios":
		return "bios"
	case len(segs) == 2 && segs[0] == "managers":
		return "manager"
	}
	return ""
}

// belongsElsewhere says whether a member links only to other systems than this one (given as
// the URIs it is known by), or to resources under them: another system's BIOS or NIC, on a
// BMC of many systems. A member that links nothing, or anything outside Systems (a Manager, a
// Chassis), may matter to every system and is kept.
func belongsElsewhere(related, here []string) bool {
	if len(related) == 0 {
		return false
	}
	ids := map[string]bool{}
	for _, uri := range here {
		if segs := linkSegments(uri); len(segs) >= 2 && segs[0] == "systems" {
			ids[segs[1]] = true
		}
	}
	for _, link := range related {
		segs := linkSegments(link)
		if len(segs) < 2 || segs[0] != "systems" || ids[segs[1]] {
			return false
		}
	}
	return true
}
