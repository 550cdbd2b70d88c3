package controller

// ReasonProbeBootEnded: the boot service ended the server's probe boot because its secrets were
// asked for twice, or by another host than the one the boot is bound to (the boot
// configuration's IgnitionServed condition says who asked). The boot's registry token may be in
// an attacker's hands: the boot is dropped at once (the registry then refuses its token) and a
// new one, with new secrets, is made (probeboot.Ended says so).
const ReasonProbeBootEnded = "ProbeBootEnded"
