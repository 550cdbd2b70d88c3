// Command manager is the Ironfleet operator: flags and wiring only; the logic lives in internal/.
package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/macdb"
	"github.com/ironfleet/ironfleet/internal/registry"
)

// options are the manager's command-line flags.
type options struct {
	metricsAddr     string
	probeAddr       string
	leaderElect     bool
	leaderElectNS   string
	macPrefixesFile string
	bmcCAFile       string
	bmcTimeout      time.Duration
	kubeQPS         float64
	kubeBurst       int
	registryAddr    string
	registryURL     string
	registrySecret  string
	systemNamespace string
	probeImage      string
	discovery       controller.DiscoverySettings
	settings        controller.Settings
	zap             zap.Options
}

func parseFlags(args []string) (*options, error) {
	o := &options{settings: controller.DefaultSettings()}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one manager replica reconciles at a time.")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "Namespace of the leader-election lease (default: the pod's namespace).")
	fs.StringVar(&o.macPrefixesFile, "mac-prefixes-file", "", "YAML MAC-prefix database (vendor, protocol, default credentials per BMC MAC prefix). Without it no Endpoint matches.")
	fs.StringVar(&o.bmcCAFile, "bmc-ca-file", "", "PEM bundle of CAs trusted for BMC certificates, in addition to the system roots.")
	fs.DurationVar(&o.bmcTimeout, "bmc-request-timeout", 30*time.Second, "Upper bound of each HTTP request to a BMC.")
	fs.DurationVar(&o.settings.ResyncPeriod, "bmc-resync-period", o.settings.ResyncPeriod, "How often a healthy BMC is polled (jittered by ±10%).")
	fs.DurationVar(&o.settings.BackoffBase, "retry-backoff-base", o.settings.BackoffBase, "First retry delay of a failing reconcile; doubles per failure.")
	fs.DurationVar(&o.settings.BackoffMax, "retry-backoff-max", o.settings.BackoffMax, "Longest retry delay of a failing reconcile.")
	fs.IntVar(&o.settings.DefaultConcurrency, "default-concurrency", o.settings.DefaultConcurrency, "Concurrent reconciles per controller, unless --concurrency says otherwise.")
	fs.Func("concurrency", "Concurrent reconciles per controller, e.g. bmc=8,endpoint=4.", func(v string) error {
		m, err := parseConcurrency(v)
		o.settings.MaxConcurrentReconciles = m
		return err
	})
	fs.Float64Var(&o.kubeQPS, "kube-api-qps", 50, "Queries per second the manager's Kubernetes client may make.")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 100, "Burst of the manager's Kubernetes client.")
	fs.StringVar(&o.registryAddr, "registry-bind-address", ":8443", "Address the probe registry (HTTPS) listens on.")
	fs.StringVar(&o.registryURL, "registry-url", "https://ironfleet-registry.ironfleet-system.svc:8443", "URL probes reach the registry at; its host is put in the registry's certificate.")
	fs.StringVar(&o.registrySecret, "registry-secret", "ironfleet-system/ironfleet-registry", "namespace/name of the Secret holding the registry's token key and certificate (created if missing).")
	fs.StringVar(&o.systemNamespace, "system-namespace", "ironfleet-system", "Namespace of the boot configurations and ignition Secrets Ironfleet makes for probe boots.")
	fs.StringVar(&o.probeImage, "probe-image", "ghcr.io/ironfleet/metalprobe:latest", "metalprobe image the boot service serves for discovery and cleanup.")
	fs.DurationVar(&o.discovery.Timeout, "discovery-timeout", 10*time.Minute, "How long a booted probe may take to report.")
	fs.Func("discovery-attempts", "Discovery boots before a server goes to Error (default 3).", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("--discovery-attempts: %q is not a whole number ≥ 1", v)
		}
		o.discovery.Attempts = int32(n)
		return nil
	})
	o.discovery.Attempts = 3
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, nil
}

func parseConcurrency(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, pair := range strings.Split(v, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(pair), "=")
		count, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || count < 1 {
			return nil, fmt.Errorf("--concurrency: %q is not controller=count with count ≥ 1", pair)
		}
		out[name] = count
	}
	return out, nil
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
	setupLog := ctrl.Log.WithName("setup")

	// Configuration errors stop the manager here, before it touches the cluster.
	db := &macdb.DB{}
	if opts.macPrefixesFile != "" {
		if db, err = macdb.Load(opts.macPrefixesFile); err != nil {
			return err
		}
	} else {
		setupLog.Info("no --mac-prefixes-file: Endpoints will not match any BMC vendor")
	}
	roots, err := bmcRoots(opts.bmcCAFile)
	if err != nil {
		return err
	}
	registryURL, err := url.Parse(opts.registryURL)
	if err != nil || (registryURL.Scheme != "https" && registryURL.Scheme != "http") || registryURL.Host == "" {
		return fmt.Errorf("--registry-url: %q is not an https URL", opts.registryURL)
	}
	secretNS, secretName, ok := strings.Cut(opts.registrySecret, "/")
	if !ok || secretNS == "" || secretName == "" {
		return fmt.Errorf("--registry-secret: %q is not namespace/name", opts.registrySecret)
	}

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
	cfg.QPS, cfg.Burst = float32(opts.kubeQPS), opts.kubeBurst
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
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	creds, err := registry.LoadOrCreate(ctx, direct, client.ObjectKey{Namespace: secretNS, Name: secretName}, []string{registryURL.Hostname()})
	if err != nil {
		return err
	}
	signer, err := registry.Setup(mgr, opts.registryAddr, creds, nil)
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr, controller.Dependencies{
		MACDB:    db,
		Connect:  redfish.Connector(redfish.Options{Timeout: opts.bmcTimeout, RootCAs: roots}),
		Settings: opts.settings,
		Probe: controller.ProbeBoot{
			Namespace: opts.systemNamespace, Image: opts.probeImage,
			RegistryURL: opts.registryURL, RegistryCA: string(creds.CertPEM), Token: signer.Token,
		},
		Discovery: opts.discovery,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	setupLog.Info("starting manager", "macPrefixes", db.Len())
	return mgr.Start(ctx)
}

// bmcRoots is the system's CA pool plus the PEM bundle at path, if any.
func bmcRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--bmc-ca-file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("--bmc-ca-file: no PEM certificate found in " + path)
	}
	return pool, nil
}
