package registry

// StatusPatch is statusPatch, for tests that apply it to a real API.
var StatusPatch = statusPatch
