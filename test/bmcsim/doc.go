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
// Firmware updates. The UpdateService offers UpdateService.SimpleUpdate (ImageURI, Targets,
// TransferProtocol HTTP or HTTPS, Username and Password sent as Basic auth to the image server;
// none in the HPE profile) and a MultipartHttpPushUri (a multipart/form-data POST with an
// UpdateParameters part, JSON with Targets, and an UpdateFile part, the image; /upload, Dell's
// /MultipartUpload, Lenovo's /update). SimpleUpdate fetches the image before it answers, as
// InsertMedia does (no proxy, certificates not verified, Options.MediaFetchTimeout). Either
// answers 202 with a Location of a Task under /redfish/v1/TaskService/Tasks (linked from the
// service root as Tasks), whose TaskState is New, then Running with PercentComplete rising,
// then Completed or Exception (the reason in the last of its Messages), over
// Options.UpdateDuration (default DefaultUpdateDuration; tests use a few hundred
// milliseconds). Images are a text file of the simulator's own, which FirmwareImage makes:
//
//	IRONFLEET-FIRMWARE 1
//	component=BIOS
//	version=2.4.0
//
// The first line is FirmwareImageMagic; then key=value lines up to a blank line or the end
// (component and version required, lines starting with # and unknown keys ignored; whatever
// follows a blank line is a payload, ignored). component is BMC, BIOS (every system's, or the
// Targets'), NIC (every system's first NIC) or a FirmwareInventory member's Id. Targets are
// @odata.ids of FirmwareInventory members, Systems or the Manager; one that names nothing is
// refused 400. An image that cannot be fetched (TransferFailed) or read, or whose component
// the inventory lacks or the Targets do not name (ApplyFailed), fails its task. What a
// finished update does: the BMC's firmware is in effect at once (Manager FirmwareVersion, the
// inventory, Dell's Previous- member: the BMC has reset itself; its sessions survive); a
// BIOS or NIC update is staged and takes effect at the system's next power-on or reset, where
// PowerAction.BIOSVersion (set on every action that boots the host) shows the BIOS it boots.
// The Dell profile's tasks are iDRAC jobs too: JID_… Ids, each also under
// Managers/iDRAC.Embedded.1/Jobs (JobState New, Running, Scheduled, Completed or Failed), and
// an update a host reset activates stays Pending (Scheduled, "Task successfully scheduled.")
// until that reset, then Completed. FailNextUpdate makes the next update's task end in
// Exception with a given message; BIOSVersion and FirmwareVersion read what runs. There is
// no HTTP hook for it: the simulator's faults are set from Go.
//
// Resources are rendered per request from a small spec, so thousands of BMCs fit in one
// process: each costs a listener, an accept goroutine and a few kilobytes, with no goroutine
// per system. StaticHandler and StartStatic serve a DMTF mockup directory instead.
package bmcsim
