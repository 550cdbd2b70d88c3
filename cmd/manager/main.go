// Command manager is the Ironfleet operator: flags and wiring only; the logic lives in internal/.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// options are the manager's command-line flags.
type options struct {
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	leaderElectNS string
	zap           zap.Options
}

func parseFlags(args []string) (*options, error) {
	o := &options{zap: zap.Options{Development: false}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one manager replica reconciles at a time.")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "Namespace of the leader-election lease (default: the pod's namespace).")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := metalv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress:  opts.probeAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "manager.metal.ironfleet.dev",
		LeaderElectionNamespace: opts.leaderElectNS,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	ctrl.Log.WithName("setup").Info("starting manager")
	return mgr.Start(ctrl.SetupSignalHandler())
}
