// Package capi is Ironfleet's Cluster API infrastructure provider: the IronfleetMachine and
// IronfleetCluster reconcilers (cmd/capi-provider). A Machine's infrastructure is a ServerClaim
// named after its IronfleetMachine, its bootstrap data the claim's ignition; the operator binds,
// installs, and on release wipes and pools the server. The provider keeps no state but its
// objects: what a claim belongs to is in labels, so clusterctl move and restarts lose nothing.
// docs/capi.md is the user's guide.
package capi

// bootstrapSecretSuffix names a machine's copy of its bootstrap data, in the claim's form.
const bootstrapSecretSuffix = "-bootstrap-data"
