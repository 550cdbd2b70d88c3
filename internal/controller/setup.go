// Package controller wires the reconcilers: one package per kind below it (enroll, server,
// claim, maintenance, firmware, health), which never import each other; what they share is in the API
// package and in the small packages beside them (settings, status, cached, bmcaccess).
package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/claim"
	"github.com/ironfleet/ironfleet/internal/controller/enroll"
	"github.com/ironfleet/ironfleet/internal/controller/firmware"
	"github.com/ironfleet/ironfleet/internal/controller/health"
	"github.com/ironfleet/ironfleet/internal/controller/maintenance"
	"github.com/ironfleet/ironfleet/internal/controller/server"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/eventrec"
	"github.com/ironfleet/ironfleet/internal/macdb"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// Dependencies are what the reconcilers need from outside Kubernetes.
type Dependencies struct {
	MACDB *macdb.DB
	// Connect opens BMC clients; BMCs share them through one cache.
	Connect  bmc.Connector
	Settings settings.Settings
	// Probe says how to boot metalprobe; Discovery bounds discovery.
	Probe     probeboot.Config
	Discovery server.DiscoverySettings
	// Firmware says where firmware updates make their ServerMaintenances (the operator's
	// namespace) and how fast they follow the BMCs' tasks.
	Firmware firmware.UpdateSettings
	// Health says how often servers' health is read, and which health taints them.
	Health health.Settings
}

// Setup registers every reconciler with the manager. The manager binary, the tests and the lab
// all wire controllers through here, so they run the same code.
func Setup(mgr ctrl.Manager, deps Dependencies) error {
	cache := bmc.NewCache(deps.Connect)
	rec, err := eventrec.For(mgr)
	if err != nil {
		return err
	}
	fw := deps.Firmware
	if fw.BootNamespace == "" {
		fw.BootNamespace = deps.Probe.Namespace // the boot service's: where images are asked of it
	}
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		&enroll.EndpointReconciler{Client: mgr.GetClient(), Events: rec.Recorder("endpoint-controller"),
			MACDB: deps.MACDB, Connect: deps.Connect, Settings: deps.Settings},
		&enroll.BMCReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: rec.Recorder("bmc-controller"),
			Clients: cache, Settings: deps.Settings},
		// After the BMC reconciler: it looks BMCs up by the index that one registers.
		&enroll.BMCSecretReconciler{Client: mgr.GetClient(), Events: rec.Recorder("bmcsecret-controller"), Settings: deps.Settings},
		&server.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: rec.Recorder("server-controller"),
			Clients: cache, Probe: deps.Probe, Discovery: deps.Discovery, Settings: deps.Settings},
		&claim.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: rec.Recorder("serverclaim-controller"),
			Settings: deps.Settings, BootOperator: deps.Probe.BootOperator},
		&maintenance.Reconciler{Client: mgr.GetClient(), Events: rec.Recorder("servermaintenance-controller"),
			Settings: deps.Settings},
		&firmware.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: rec.Recorder("serverfirmware-controller"), Clients: cache,
			Update: fw},
		&firmware.BaselineReconciler{Client: mgr.GetClient()},
	}
	if !deps.Health.Disabled {
		reconcilers = append(reconcilers, &health.Reconciler{Client: mgr.GetClient(), Events: rec.Recorder("serverhealth-controller"),
			Clients: cache, Settings: deps.Health})
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", r, err)
		}
	}
	return nil
}
