// Package bmcsim simulates Redfish BMCs for tests, the local lab and benchmarks.
//
// A BMC serves a DMTF-shaped Redfish tree (service root, systems with processors, memory,
// storage and NICs, one manager, one chassis per system, sessions) over HTTP or HTTPS with a
// self-signed certificate, with Basic and session authentication, ComputerSystem.Reset, boot
// source override, boot modes (SystemSpec.BootMode: UEFI, UEFISecureBoot or Legacy; a
// SecureBoot resource per system, whose SecureBootEnable a PATCH changes for the next
// power-on; none under the NoSecureBoot quirk, in the OpenBMC profile), UEFI HTTP boot by URI
// (Boot.HttpBootUri, PATCHable: a UefiHttp boot hands it to the host behind the system in
// PowerOnEvent.HTTPBootURI and PowerAction.HTTPBootURI, and it is never logged or echoed in
// an error; no such property and no UefiHttp target under the NoHTTPBootURI quirk, in the Dell
// profile), VirtualMedia (InsertMedia fetches the image over HTTP into Options.MediaDir, and
// OnMediaChange tells the host behind the system; docs/bmc-virtual-media.md), firmware and
// BIOS settings (an UpdateService whose FirmwareInventory lists the BMC's firmware and each
// system's BIOS and first NIC, each naming what it belongs to in RelatedItem, with the versions
// the model holds, Options.FirmwareVersion and SystemSpec.BIOSVersion among them, under Ids in
// the profile's style: iDRAC's Installed-<component>-<version>__<FQDD> and a Previous- member,
// Supermicro's BMC and BIOS, numbers otherwise; a Bios resource per system whose Settings
// object takes a PATCH of Attributes checked against a BIOS attribute registry, published under
// /redfish/v1/Registries as a registry file naming its Location, the staged values applying at
// the system's next power-on or reset, BootMode among them as the mode it boots in), and
// injected faults. A Profile gives it a vendor's personality and Quirks (Options.Quirks,
// ParseQuirks) switch on the deviations real BMCs show (see REDFISH-QUIRKS.md in the shared
// design docs), so clients are tested against what hardware does, not only what the schema
// promises.
//
// Resources are rendered per request from a small spec, so thousands of BMCs fit in one
// process: each costs a listener, an accept goroutine and a few kilobytes, with no goroutine
// per system. StaticHandler and StartStatic serve a DMTF mockup directory instead.
package bmcsim
