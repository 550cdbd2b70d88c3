// Package ipmi drives BMCs that speak only IPMI v2.0 over RMCP+ (UDP 623) through the bmc.Client
// seam: one system per BMC (SystemURI), power through Chassis Control, boot overrides through the
// System Boot Options parameters 3 and 5, identity from the System GUID and FRU device 0.
//
// The session layer is github.com/bougou/go-ipmi v0.9.1: pure Go (no ipmitool processes),
// maintained, and it implements RMCP+ with cipher suites 3 (HMAC-SHA1, AES-CBC-128) and 17
// (HMAC-SHA256, AES-CBC-128). What this package owns instead of the library, and why:
//
//   - Suite policy: suites 17 then 3 are always passed explicitly. The library's automatic
//     choice includes suites without encryption, and suite 0 logs in with any password.
//   - Error classification (classify.go): the library joins per-suite connect errors with %v,
//     so errors.Is fails on them; we walk the error chain and its text to tell wrong
//     credentials from an unreachable BMC from a BMC without suites 17 and 3.
//   - Session lifecycle (client.go): one session per client, serialised calls, an idempotent
//     Close (the library's Close panics when called twice), and one reconnect when a BMC that
//     restarted forgot the session.
//   - Decoding (decode.go, fru.go): the few responses we use are decoded from raw bytes by
//     small fuzzed decoders, and FRU data by ParseFRU, which is as tolerant as ipmitool of the
//     sloppy FRUs real machines carry (the library's FRU parser rejects some of them).
package ipmi
