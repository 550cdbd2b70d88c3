package v1alpha1

// Finalizers Ironfleet puts on its objects. Each holds an object that is deleted until what it
// guards is done; a person who removes one by hand skips that.
const (
	// ServerFinalizer keeps a deleted Server until its machine holds no tenant data that was not
	// verified wiped: deleting a Server (or its BMC) never brings the machine back, re-enrolled,
	// as a new Server that is discovered and pooled with the last tenant's data on its disks.
	// Like Metal3's deprovisioning on delete, the Server's lifecycle goes on while it is deleted
	// — its claim is released, the probe wipes it, the wipe is verified — and the Server goes
	// once that is done. It is never claimed meanwhile (a deleted Server matches no claim). An
	// admin who wants the machine gone without a wipe says so with AnnotationDeleteWithoutWipe;
	// an event records it.
	ServerFinalizer = "metal.ironfleet.dev/server"

	// BMCFinalizer lets the BMC reconciler delete the BMC's unclaimed Servers (and keep the
	// claimed ones) before the BMC goes.
	BMCFinalizer = "metal.ironfleet.dev/bmc"

	// BMCSecretFinalizer keeps a BMCSecret while a BMC names it. A deleted BMC waits for its
	// servers' wipes (ServerFinalizer), which it does with these credentials: a BMCSecret
	// deleted with its BMC (kubectl delete -f of both; the garbage collector's foreground
	// deletion of the Endpoint that made both) would leave those wipes waiting for ever. A
	// BMCSecret deleted while in use goes once no BMC names it, as a PersistentVolumeClaim in
	// use by a Pod does.
	BMCSecretFinalizer = "metal.ironfleet.dev/bmc-secret"

	// EndpointFinalizer keeps a deleted Endpoint until the BMC it made is gone. The BMC reaches
	// its machines at the Endpoint's address, and a deleted BMC waits for its servers' wipes
	// (ServerFinalizer), which need that address: an Endpoint that went at once would leave them
	// unreachable, and its garbage-collected BMC waiting for ever. So a deleted Endpoint deletes
	// its BMC itself (the garbage collector does not, while the Endpoint is there) and goes after
	// it; its BMCSecret, which it owns, is garbage-collected then.
	EndpointFinalizer = "metal.ironfleet.dev/endpoint"

	// ClaimFinalizer holds a ServerClaim until its server is released.
	ClaimFinalizer = "metal.ironfleet.dev/claim"

	// MaintenanceFinalizer holds a ServerMaintenance until its server is given back.
	MaintenanceFinalizer = "metal.ironfleet.dev/maintenance"
)
