package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ironfleet/ironfleet/internal/capi"
)

// capiLab is Cluster API in the lab: its core controllers and Ironfleet's provider, each on a
// manager of its own, in-process.
type capiLab struct {
	stop context.CancelFunc
	done chan error
}

// startClusterAPI runs Cluster API's own core controllers (cluster, machine, machine set,
// machine deployment), built from the pinned module, and Ironfleet's infrastructure provider
// (as the provider's ServiceAccount when Options.CAPIProviderConfig says so). Without CAPI's
// webhooks, a client of the lab writes the defaults they would (LabMachineDeployment).
func (l *Lab) startClusterAPI() error {
	providerCfg := l.Env.Config
	if l.Opts.CAPIProviderConfig != nil {
		var err error
		if providerCfg, err = l.Opts.CAPIProviderConfig(l.Env); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	core, err := newCAPICore(ctx, l.Env.Config)
	if err != nil {
		cancel()
		return err
	}
	l.capi = &capiLab{stop: cancel, done: make(chan error, 2)}
	go func() { l.capi.done <- core.Start(ctx) }()
	opts := capi.Options{MetricsAddr: "0", ProbeAddr: "0", InProcess: true}
	go func() { l.capi.done <- capi.Run(ctx, providerCfg, opts) }()
	return nil
}

// stopClusterAPI stops both managers and says why either stopped early.
func (l *Lab) stopClusterAPI() error {
	if l.capi == nil {
		return nil
	}
	l.capi.stop()
	var errs []error
	for range 2 {
		select {
		case err := <-l.capi.done:
			errs = append(errs, err)
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("cluster API managers did not stop within 30s"))
		}
	}
	l.capi = nil
	return errors.Join(errs...)
}

// newCAPICore is a manager with Cluster API's core reconcilers, set up as its own main does
// (its cache options, indexes and ClusterCache), for the controllers a MachineDeployment needs.
func newCAPICore(ctx context.Context, cfg *rest.Config) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	const name = "capi-controller-manager"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  setup.ManagerCacheOptions(scheme, name, "", 10*time.Minute),
		Client:                 setup.ManagerClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster API manager: %w", err)
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("cluster API indexes: %w", err)
	}
	secrets, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, err
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(name, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		return nil, fmt.Errorf("cluster API cluster cache: %w", err)
	}
	one := controller.Options{MaxConcurrentReconciles: 2}
	c := client.WithFieldOwner(mgr.GetClient(), "manager")
	for what, setupErr := range map[string]error{
		"Cluster": (&cluster.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
			RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, one),
		"Machine": (&machine.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
			RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, one),
		// No preflight checks: they wait for a control plane provider the lab does not run.
		"MachineSet": (&machineset.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
			PreflightChecks: sets.New[clusterv1.MachineSetPreflightCheck]()}).SetupWithManager(ctx, mgr, one),
		"MachineDeployment": (&machinedeployment.Reconciler{Client: c, APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, one),
	} {
		if setupErr != nil {
			return nil, fmt.Errorf("cluster API %s controller: %w", what, setupErr)
		}
	}
	return mgr, nil
}
