package capi

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Options are the provider's settings; BindFlags exposes each as a flag.
type Options struct {
	MetricsAddr   string
	ProbeAddr     string
	LeaderElect   bool
	LeaderElectNS string
	// InProcess lets several providers run one after another in one process (tests):
	// controller names may repeat.
	InProcess bool
}

// DefaultOptions are the shipped defaults.
func DefaultOptions() Options { return Options{MetricsAddr: ":8080", ProbeAddr: ":8081"} }

// BindFlags registers a flag for every option, defaulting to o's values.
func BindFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz probes bind to; 0 disables them.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader so that only one provider replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectNS, "leader-election-namespace", o.LeaderElectNS, "Namespace of the leader-election lease (default: the pod's namespace).")
}

// Scheme has the kinds the provider reads and writes: Kubernetes', Cluster API's core,
// Ironfleet's metal and infrastructure kinds.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, metalv1alpha1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run runs the provider against cfg until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "capi-provider.infrastructure.ironfleet.dev",
		LeaderElectionNamespace: o.LeaderElectNS,
	}
	if o.InProcess {
		mgrOpts.Controller = ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := SetupWithManager(mgr); err != nil {
		return err
	}
	if o.ProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}
