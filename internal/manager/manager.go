// Package manager wires the Ironfleet operator: configuration, the controller-runtime manager,
// the registry and every reconciler. cmd/manager runs it from flags; the lab and the tests run
// the very same wiring in-process.
package manager

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/ipmi"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/firmware"
	"github.com/ironfleet/ironfleet/internal/controller/server"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/macdb"
	"github.com/ironfleet/ironfleet/internal/probeboot"
	"github.com/ironfleet/ironfleet/internal/registry"
)

// Options are the manager's settings; BindFlags exposes each as a flag.
type Options struct {
	MetricsAddr     string
	ProbeAddr       string
	PprofAddr       string
	LeaderElect     bool
	LeaderElectNS   string
	MACPrefixesFile string
	BMCCAFile       string
	// ImageCAFile is a PEM bundle the probe trusts for claims' images (https servers and OCI
	// registries), besides the system roots and the registry's own CA.
	ImageCAFile     string
	BMCTimeout      time.Duration
	KubeQPS         float64
	KubeBurst       int
	RegistryAddr    string
	RegistryURL     string
	RegistrySecret  string
	SystemNamespace string
	ProbeImage      string

	// BMCMaxResponseBytes bounds each Redfish response's body; BMCMaxSystems is how many
	// systems a BMC may list (docs/bmc-access.md: what a hostile BMC can do).
	BMCMaxResponseBytes int64
	BMCMaxSystems       int

	// BootOperator names the boot service serving the boot configurations the operator makes
	// (their metal.ironfleet.dev/boot-operator label).
	BootOperator string
	Discovery    server.DiscoverySettings
	Settings     settings.Settings
	// FirmwareTaskPoll is how often a BMC's firmware update task is read; FirmwareStepTimeout
	// bounds each step of a firmware update (docs/firmware.md).
	FirmwareTaskPoll, FirmwareStepTimeout time.Duration
	// GCPercent is the process's garbage-collection target (what GOGC sets), applied by
	// cmd/manager, not by a manager run in another program's process.
	GCPercent int
	// InProcess lets several managers run one after another in one process (the lab's
	// restarts): controller names may repeat.
	InProcess bool
}

// DefaultOptions are the shipped defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr: ":8080", ProbeAddr: ":8081",
		BMCTimeout: 30 * time.Second, KubeQPS: 50, KubeBurst: 100,
		BMCMaxResponseBytes: redfish.DefaultMaxResponseBytes, BMCMaxSystems: redfish.DefaultMaxSystems,
		RegistryAddr:     ":8443",
		RegistryURL:      "https://ironfleet-registry.ironfleet-system.svc:8443",
		RegistrySecret:   "ironfleet-system/ironfleet-registry",
		SystemNamespace:  "ironfleet-boot",
		ProbeImage:       "ghcr.io/ironfleet/metalprobe:latest",
		BootOperator:     metalv1alpha1.BootOperatorIronfleet,
		Discovery:        server.DiscoverySettings{Timeout: 10 * time.Minute, Attempts: 3, InstallTimeout: 30 * time.Minute, InstallAttempts: 3},
		Settings:         settings.DefaultSettings(),
		GCPercent:        DefaultGCPercent,
		FirmwareTaskPoll: firmware.DefaultTaskPoll, FirmwareStepTimeout: firmware.DefaultStepTimeout,
	}
}

// DefaultGCPercent: the manager collects garbage when its heap has grown by a quarter since the
// last collection, not doubled (Go's 100). At 1,000 servers, back to back (docs/bench): peak
// resident memory 95 MiB at 50, 88 MiB at 25, for 62 CPU-seconds over the run against 55. At
// 10,000 (docs/bench; runs of neighbouring commits) it is steeper: 266 MiB against 353, for
// 1,292 CPU-seconds against 815 — time a small control-plane node's apiserver then lacks.
// Users with memory to spare set 50 or 100.
const DefaultGCPercent = 25

// BindFlags registers a flag for every option, defaulting to o's values.
func BindFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "Address Go's pprof endpoints bind to, for profiling; empty (the default) disables them.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader so that only one manager replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectNS, "leader-election-namespace", o.LeaderElectNS, "Namespace of the leader-election lease (default: the pod's namespace).")
	fs.StringVar(&o.MACPrefixesFile, "mac-prefixes-file", o.MACPrefixesFile, "YAML MAC-prefix database (vendor, protocol, default credentials per BMC MAC prefix). Without it no Endpoint matches.")
	fs.StringVar(&o.BMCCAFile, "bmc-ca-file", o.BMCCAFile, "PEM bundle of CAs trusted for BMC certificates, in addition to the system roots.")
	fs.StringVar(&o.ImageCAFile, "image-ca-file", o.ImageCAFile, "PEM bundle of CAs the probe trusts for claims' images (https servers, OCI registries), in addition to the system roots.")
	fs.DurationVar(&o.BMCTimeout, "bmc-request-timeout", o.BMCTimeout, "Upper bound of each HTTP request to a Redfish BMC, and of each IPMI command with its retries.")
	fs.Func("bmc-max-response-bytes", fmt.Sprintf("Largest Redfish response body read from a BMC, in bytes; a larger one fails the request (default %d).", o.BMCMaxResponseBytes), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("--bmc-max-response-bytes: %q is not a whole number ≥ 1", v)
		}
		o.BMCMaxResponseBytes = n
		return nil
	})
	fs.Func("max-systems-per-bmc", fmt.Sprintf("Most systems a Redfish BMC may list; one that lists more gets no Servers and is TooManySystems (default %d).", o.BMCMaxSystems), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("--max-systems-per-bmc: %q is not a whole number ≥ 1", v)
		}
		o.BMCMaxSystems = n
		return nil
	})
	fs.DurationVar(&o.Settings.ResyncPeriod, "bmc-resync-period", o.Settings.ResyncPeriod, "How often a healthy BMC is polled (jittered by ±10%).")
	fs.DurationVar(&o.Settings.BackoffBase, "retry-backoff-base", o.Settings.BackoffBase, "First retry delay of a failing reconcile; doubles per failure.")
	fs.DurationVar(&o.Settings.BackoffMax, "retry-backoff-max", o.Settings.BackoffMax, "Longest retry delay of a failing reconcile.")
	fs.IntVar(&o.Settings.DefaultConcurrency, "default-concurrency", o.Settings.DefaultConcurrency, "Concurrent reconciles per controller, unless --concurrency says otherwise.")
	fs.Func("concurrency", "Concurrent reconciles per controller, e.g. bmc=8,server=16.", func(v string) error {
		m, err := ParseConcurrency(v)
		o.Settings.MaxConcurrentReconciles = m
		return err
	})
	fs.IntVar(&o.GCPercent, "gc-percent", o.GCPercent, "Garbage-collection target of the manager process, as GOGC: lower keeps less memory for more CPU. A GOGC environment variable is honoured instead when this flag is not given.")
	fs.Float64Var(&o.KubeQPS, "kube-api-qps", o.KubeQPS, "Queries per second the manager's Kubernetes client may make of each kind of object (Servers, ServerClaims, Secrets, …: the client keeps a rate limiter per kind, so the manager's total may be a few times this).")
	fs.IntVar(&o.KubeBurst, "kube-api-burst", o.KubeBurst, "Burst of the manager's Kubernetes client, per kind of object, as --kube-api-qps.")
	fs.StringVar(&o.RegistryAddr, "registry-bind-address", o.RegistryAddr, "Address the probe registry (HTTPS) listens on.")
	fs.StringVar(&o.RegistryURL, "registry-url", o.RegistryURL, "URL probes reach the registry at; its host is put in the registry's certificate.")
	fs.StringVar(&o.RegistrySecret, "registry-secret", o.RegistrySecret, "namespace/name of the Secret holding the registry's token key and certificate (created if missing).")
	fs.StringVar(&o.SystemNamespace, "system-namespace", o.SystemNamespace, "Namespace of the boot configurations and ignition Secrets Ironfleet makes for probe boots: the boot service reads every Secret in it, so it should hold nothing else (not the --registry-secret; docs/security.md).")
	fs.StringVar(&o.ProbeImage, "probe-image", o.ProbeImage, "metalprobe image the boot service serves for discovery and cleanup.")
	fs.StringVar(&o.BootOperator, "boot-operator", o.BootOperator, "Which boot service serves the boot configurations the operator makes: Ironfleet's (ironfleet) or another that honours the ServerBootConfiguration contract, by the name it answers to (the metal.ironfleet.dev/boot-operator label).")
	fs.DurationVar(&o.Settings.Power.Confirm, "power-confirm-timeout", o.Settings.Power.Confirm, "How long a BMC that took a power request may take to report it before it is sent once more (then left Unconfirmed).")
	fs.DurationVar(&o.Settings.Power.GracefulShutdown, "graceful-shutdown-timeout", o.Settings.Power.GracefulShutdown, "How long a server's OS has to stop after a GracefulShutdown (a claim's power Off) before its power is forced off.")
	fs.DurationVar(&o.Discovery.Timeout, "discovery-timeout", o.Discovery.Timeout, "How long a booted probe may take to report (discovery and wipe).")
	fs.Func("discovery-attempts", fmt.Sprintf("Probe boots before a server goes to Error (default %d).", o.Discovery.Attempts), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("--discovery-attempts: %q is not a whole number ≥ 1", v)
		}
		o.Discovery.Attempts = int32(n)
		return nil
	})
	fs.DurationVar(&o.FirmwareTaskPoll, "firmware-task-poll", o.FirmwareTaskPoll, "How often a BMC's task installing a firmware update is read.")
	fs.DurationVar(&o.FirmwareStepTimeout, "firmware-step-timeout", o.FirmwareStepTimeout, "How long each step of a firmware update (sending, installing, the reset, verifying) may take before the update fails, the server staying in maintenance.")
	fs.DurationVar(&o.Discovery.InstallTimeout, "install-timeout", o.Discovery.InstallTimeout, "How long a probe booted to install a claim's image may take to report (download, write, read back).")
	fs.Func("install-attempts", fmt.Sprintf("Install boots a claim's image gets before the claim shows it failed (default %d).", o.Discovery.InstallAttempts), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("--install-attempts: %q is not a whole number ≥ 1", v)
		}
		o.Discovery.InstallAttempts = int32(n)
		return nil
	})
}

// Args renders o as the flags BindFlags reads, so that a manager process started with them runs
// with exactly o. InProcess has no flag.
func (o Options) Args() []string {
	dur := func(d time.Duration) string { return d.String() }
	args := []string{
		"--metrics-bind-address=" + o.MetricsAddr,
		"--health-probe-bind-address=" + o.ProbeAddr,
		"--pprof-bind-address=" + o.PprofAddr,
		"--leader-elect=" + strconv.FormatBool(o.LeaderElect),
		"--leader-election-namespace=" + o.LeaderElectNS,
		"--mac-prefixes-file=" + o.MACPrefixesFile,
		"--bmc-ca-file=" + o.BMCCAFile,
		"--image-ca-file=" + o.ImageCAFile,
		"--bmc-request-timeout=" + dur(o.BMCTimeout),
		"--bmc-max-response-bytes=" + strconv.FormatInt(o.BMCMaxResponseBytes, 10),
		"--max-systems-per-bmc=" + strconv.Itoa(o.BMCMaxSystems),
		"--bmc-resync-period=" + dur(o.Settings.ResyncPeriod),
		"--retry-backoff-base=" + dur(o.Settings.BackoffBase),
		"--retry-backoff-max=" + dur(o.Settings.BackoffMax),
		"--default-concurrency=" + strconv.Itoa(o.Settings.DefaultConcurrency),
		"--kube-api-qps=" + strconv.FormatFloat(o.KubeQPS, 'g', -1, 64),
		"--kube-api-burst=" + strconv.Itoa(o.KubeBurst),
		"--registry-bind-address=" + o.RegistryAddr,
		"--registry-url=" + o.RegistryURL,
		"--registry-secret=" + o.RegistrySecret,
		"--system-namespace=" + o.SystemNamespace,
		"--probe-image=" + o.ProbeImage,
		"--boot-operator=" + o.BootOperator,
		"--power-confirm-timeout=" + dur(o.Settings.Power.Confirm),
		"--graceful-shutdown-timeout=" + dur(o.Settings.Power.GracefulShutdown),
		"--discovery-timeout=" + dur(o.Discovery.Timeout),
		"--discovery-attempts=" + strconv.Itoa(int(o.Discovery.Attempts)),
		"--install-timeout=" + dur(o.Discovery.InstallTimeout),
		"--install-attempts=" + strconv.Itoa(int(o.Discovery.InstallAttempts)),
		"--gc-percent=" + strconv.Itoa(o.GCPercent),
		"--firmware-task-poll=" + dur(o.FirmwareTaskPoll),
		"--firmware-step-timeout=" + dur(o.FirmwareStepTimeout),
	}
	if len(o.Settings.MaxConcurrentReconciles) > 0 {
		pairs := make([]string, 0, len(o.Settings.MaxConcurrentReconciles))
		for name, n := range o.Settings.MaxConcurrentReconciles {
			pairs = append(pairs, name+"="+strconv.Itoa(n))
		}
		slices.Sort(pairs)
		args = append(args, "--concurrency="+strings.Join(pairs, ","))
	}
	return args
}

// ParseConcurrency reads controller=count pairs.
func ParseConcurrency(v string) (map[string]int, error) {
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

// Prepared is a configuration that has been read and checked, ready to run against a cluster.
type Prepared struct {
	opts        Options
	db          *macdb.DB
	roots       *x509.CertPool
	imageCA     []byte
	registryURL *url.URL
	secret      client.ObjectKey
}

// Prepare reads and checks everything that does not need the cluster, so that a bad file or
// flag stops the manager at start-up with an error naming it.
func Prepare(o Options) (*Prepared, error) {
	p := &Prepared{opts: o, db: &macdb.DB{}}
	var err error
	if o.MACPrefixesFile != "" {
		if p.db, err = macdb.Load(o.MACPrefixesFile); err != nil {
			return nil, err
		}
	}
	if p.roots, err = bmcRoots(o.BMCCAFile); err != nil {
		return nil, err
	}
	if o.ImageCAFile != "" {
		if p.imageCA, err = os.ReadFile(o.ImageCAFile); err != nil {
			return nil, fmt.Errorf("--image-ca-file: %w", err)
		}
		if _, err := ignition.CertPool(p.imageCA); err != nil {
			return nil, fmt.Errorf("--image-ca-file %s: %w", o.ImageCAFile, err)
		}
	}
	p.registryURL, err = url.Parse(o.RegistryURL)
	if err != nil || (p.registryURL.Scheme != "https" && p.registryURL.Scheme != "http") || p.registryURL.Host == "" {
		return nil, fmt.Errorf("--registry-url: %q is not an https URL", o.RegistryURL)
	}
	if errs := validation.IsValidLabelValue(o.BootOperator); o.BootOperator == "" || len(errs) > 0 {
		return nil, fmt.Errorf("--boot-operator: %q is not a label value naming a boot service (%s)", o.BootOperator, strings.Join(errs, "; "))
	}
	ns, name, ok := strings.Cut(o.RegistrySecret, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--registry-secret: %q is not namespace/name", o.RegistrySecret)
	}
	p.secret = client.ObjectKey{Namespace: ns, Name: name}
	if o.Discovery.Attempts < 1 || o.Discovery.Timeout <= 0 {
		return nil, errors.New("--discovery-timeout and --discovery-attempts must be positive")
	}
	if o.Settings.Power.Confirm <= 0 {
		return nil, fmt.Errorf("--power-confirm-timeout: %s is not a positive duration", o.Settings.Power.Confirm)
	}
	if o.Settings.Power.GracefulShutdown <= 0 {
		return nil, fmt.Errorf("--graceful-shutdown-timeout: %s is not a positive duration", o.Settings.Power.GracefulShutdown)
	}
	if o.GCPercent < 10 || o.GCPercent > 1000 {
		return nil, fmt.Errorf("--gc-percent: %d is not between 10 and 1000", o.GCPercent)
	}
	if o.Discovery.InstallAttempts < 1 || o.Discovery.InstallTimeout <= 0 {
		return nil, errors.New("--install-timeout and --install-attempts must be positive")
	}
	if o.FirmwareTaskPoll <= 0 {
		return nil, fmt.Errorf("--firmware-task-poll: %s is not a positive duration", o.FirmwareTaskPoll)
	}
	if o.FirmwareStepTimeout <= 0 {
		return nil, fmt.Errorf("--firmware-step-timeout: %s is not a positive duration", o.FirmwareStepTimeout)
	}
	return p, nil
}

// Run runs the operator against cfg until ctx ends.
func (p *Prepared) Run(ctx context.Context, cfg *rest.Config) error {
	o := p.opts
	log := ctrl.Log.WithName("setup")
	if p.db.Len() == 0 {
		log.Info("no MAC-prefix database entries: Endpoints will not match any BMC vendor")
	}
	if p.secret.Namespace == o.SystemNamespace {
		// As OLM installs it: one namespace for everything (docs/security.md).
		log.Info("the registry's keys are in the boot namespace, where the boot service may read every Secret: give the boots a namespace of their own (--system-namespace)", "namespace", o.SystemNamespace)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := metalv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.KubeQPS), o.KubeBurst
	mgrOpts := ctrl.Options{
		Scheme: scheme,
		// No managedFields, and Servers' inventories compact: what the reconcilers read.
		Cache:                   cached.Options(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "manager.metal.ironfleet.dev",
		LeaderElectionNamespace: o.LeaderElectNS,
	}
	if o.InProcess {
		mgrOpts.Controller = ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	creds, err := registry.LoadOrCreate(ctx, direct, p.secret, []string{p.registryURL.Hostname()})
	if err != nil {
		return err
	}
	signer, err := registry.Setup(mgr, o.RegistryAddr, creds, o.SystemNamespace, nil)
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr, controller.Dependencies{
		MACDB: p.db,
		Connect: bmc.ByProtocol(redfish.Connector(redfish.Options{Timeout: o.BMCTimeout, RootCAs: p.roots,
			MaxResponseBytes: o.BMCMaxResponseBytes, MaxSystems: o.BMCMaxSystems}),
			ipmi.Connector(ipmi.Options{CallTimeout: o.BMCTimeout})),
		Settings: o.Settings,
		Probe: probeboot.Config{
			Namespace: o.SystemNamespace, Image: o.ProbeImage,
			RegistryURL: o.RegistryURL, RegistryCA: string(creds.CertPEM), Token: signer.Token,
			BootOperator: o.BootOperator, ImageCA: string(p.imageCA),
		},
		Discovery: o.Discovery,
		// The registry's Secret is in the operator's own namespace.
		Firmware: firmware.UpdateSettings{Namespace: p.secret.Namespace, TaskPoll: o.FirmwareTaskPoll, StepTimeout: o.FirmwareStepTimeout},
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting manager", "macPrefixes", p.db.Len(), "registry", o.RegistryURL)
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
