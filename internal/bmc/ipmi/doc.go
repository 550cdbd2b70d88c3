// Package ipmi drives BMCs that speak only IPMI v2.0 over RMCP+ (UDP 623) through the bmc.Client
// seam: one system per BMC (SystemURI), power through Chassis Control, boot overrides through the
// System Boot Options parameters 3 and 5, identity from the System GUID and FRU device 0.
//
// The session layer is github.com/bougou/go-ipmi v0.9.1: pure Go (no ipmitool processes),
// maintained, and it implements RMCP+ with cipher suites 3 (HMAC-SHA1, AES-CBC-128) and 17
// (HMAC-SHA256, AES-CBC-128). What this package owns instead of the library, and why:
//
//   - Suite policy: suite 17 alone, then suite 3 alone only when the BMC refused 17 at Open
//     Session (a cipher status, ipmi_sim's short reply, or no answer), never suite 0 (it logs in
//     with any password). The library's own suite list moves on after any failure, so a wrong
//     password would cost two failed logins, and its automatic choice includes suites without
//     encryption.
//   - Login: the session privilege is Address.PrivilegeLevel (?privilegelevel=, ADMINISTRATOR
//     by default); a refused role is told apart from a wrong password. Passwords over 20 bytes
//     (the IPMI 2.0 limit) are refused before sending anything. IPv6 hosts are handed to the
//     library bracketed, as it dials Sprintf("%s:%d").
//   - Error classification (classify.go): the library joins per-suite connect errors with %v,
//     so errors.Is fails on them; we walk the error chain and its text to tell wrong
//     credentials from a refused privilege level from an unreachable BMC from a BMC without
//     suites 17 and 3.
//   - Session lifecycle (client.go): one session per client, serialised calls, an idempotent
//     Close (the library's Close panics when called twice; a closed client answers Unreachable,
//     "replaced", so the caller fetches its successor from bmc.Cache), and one reconnect when a
//     BMC that restarted forgot the session. Optional reads do not reconnect: the BMC's MAC is
//     read once per client, "" when a request goes unanswered; FRU data is kept once read or
//     known absent, and read again after other failures.
//   - Decoding (decode.go, fru.go): the few responses we use are decoded from raw bytes by
//     small fuzzed decoders, and FRU data by ParseFRU, which is as tolerant as ipmitool of the
//     sloppy FRUs real machines carry (the library's FRU parser rejects some of them).
package ipmi
