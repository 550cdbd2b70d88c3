// Command boot-service is Ironfleet's boot service: it watches ServerBootConfigurations and
// network-boots the servers they name (DHCP, TFTP, HTTP). Flags and wiring only; the service
// is internal/boot. See docs/boot.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "boot-service:", err)
		os.Exit(1)
	}
}

// flagOf names the flag of each Config field, so that a bad config names what to fix.
var flagOf = map[string]string{
	"Mode": "--mode", "Interface": "--interface", "ServerIP": "--server-ip", "PublicURL": "--public-url",
	"DHCPRange": "--dhcp-range", "SubnetMask": "--dhcp-subnet-mask", "Router": "--dhcp-router",
	"LeaseTime": "--dhcp-lease-time", "EFIBootFile": "--efi-boot-file", "ProbeDir": "--probe-dir",
	"IPXEDir": "--ipxe-dir", "HTTPBindAddress": "--http-bind-address", "TFTPBindAddress": "--tftp-bind-address",
	"URLKey": "--url-key-file", "RecheckInterval": "--recheck-interval", "Namespace": "--namespace",
	"BootOperator": "--boot-operator", "MediaURL": "--media-url", "MediaBindAddress": "--media-bind-address",
	"FirmwareCacheDir": "--firmware-cache-dir",
}

type options struct {
	mode, iface, serverIP, publicURL, dhcpRange, subnetMask, router string
	leaseTime, recheck                                              time.Duration
	efiBootFile, probeDir, ipxeDir, httpAddr, tftpAddr              string
	metricsAddr, probeAddr, selector, namespace, urlKeyFile         string
	urlKeySecret, bootOperator, mediaURL, mediaAddr                 string
	firmwareCacheDir                                                string
}

func run(args []string) error {
	var o options
	zapOpts := zap.Options{}
	fs := flag.NewFlagSet("boot-service", flag.ContinueOnError)
	fs.StringVar(&o.mode, "mode", "proxy", "DHCP mode: proxy (next to the site's DHCP server; answers PXE/iPXE clients only, no addresses), full (a dedicated provisioning network; leases addresses from --dhcp-range) or off (no DHCP at all: servers boot the probe from virtual media).")
	fs.StringVar(&o.iface, "interface", "", "The provisioning network's interface; the DHCP sockets are bound to it (default: the interface that holds --server-ip; unused with --mode off).")
	fs.StringVar(&o.serverIP, "server-ip", "", "This host's IPv4 address on the provisioning network: TFTP next-server and DHCP server identifier (required).")
	fs.StringVar(&o.publicURL, "public-url", "", "Base URL hosts reach this service's HTTP side at (default http://<server-ip>:<port of --http-bind-address>).")
	fs.StringVar(&o.dhcpRange, "dhcp-range", "", "Full mode: the addresses to lease, start-end (e.g. 10.20.0.100-10.20.0.199).")
	fs.StringVar(&o.subnetMask, "dhcp-subnet-mask", "", "Full mode: the subnet mask handed out (e.g. 255.255.255.0).")
	fs.StringVar(&o.router, "dhcp-router", "", "Full mode: the default gateway handed out (optional).")
	fs.DurationVar(&o.leaseTime, "dhcp-lease-time", time.Hour, "Full mode: the lease time.")
	fs.StringVar(&o.efiBootFile, "efi-boot-file", dhcp.FileEFISNPOnly, "What EFI PXE clients load: snponly.efi (the firmware's NIC driver) or ipxe.efi (iPXE's own drivers).")
	fs.StringVar(&o.probeDir, "probe-dir", "", "Directory holding the probe's vmlinuz and initramfs.cpio.gz (required).")
	fs.StringVar(&o.ipxeDir, "ipxe-dir", "/usr/lib/ipxe", "Directory holding undionly.kpxe, ipxe.efi and snponly.efi (Debian's ipxe package).")
	fs.StringVar(&o.httpAddr, "http-bind-address", "", "Address the HTTP side listens on (default <server-ip>:8080).")
	fs.StringVar(&o.tftpAddr, "tftp-bind-address", "", "Address TFTP listens on (default <server-ip>:69).")
	fs.StringVar(&o.mediaURL, "media-url", "", "Base URL BMCs reach this service's HTTP side at, for virtual-media ISOs (<media-url>/boot/<token>/probe.iso; default http://<media-bind-address> when that is set with a host, else --public-url).")
	fs.StringVar(&o.mediaAddr, "media-bind-address", "", "A second address the HTTP side listens on, e.g. on the BMC network, for virtual-media ISOs (optional).")
	fs.StringVar(&o.firmwareCacheDir, "firmware-cache-dir", "", "Directory of its own where firmware images served to BMCs (<media-url>/firmware/<token>) are downloaded and checked before they are served; files in it the service does not serve are removed (default <tmp>/ironfleet-boot-service-firmware).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8082", "Address of /metrics (0 disables).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8083", "Address of /healthz and /readyz (0 disables).")
	fs.StringVar(&o.bootOperator, "boot-operator", metalv1alpha1.BootOperatorIronfleet, "The name this service answers to: it serves the boot configurations labelled metal.ironfleet.dev/boot-operator=<name> (the manager's --boot-operator; unlabelled ones are ironfleet's).")
	fs.StringVar(&o.selector, "server-selector", "", "Label selector of the Servers this service boots (empty: all); other Servers' boot configurations are left alone.")
	fs.StringVar(&o.namespace, "namespace", "ironfleet-boot", "Namespace of the boot configurations and ignition Secrets served (the operator's --system-namespace); only it is watched. It should hold nothing else: the service may read every Secret in it (docs/security.md).")
	fs.StringVar(&o.urlKeyFile, "url-key-file", "", "File holding the key (at least 32 bytes) that signs per-boot URLs. Empty: a Secret in --namespace, created on first start (see --url-key-secret).")
	fs.StringVar(&o.urlKeySecret, "url-key-secret", "ironfleet-boot-url-key", "Name of the Secret in --namespace holding the URL key when --url-key-file is not set.")
	fs.DurationVar(&o.recheck, "recheck-interval", 30*time.Second, "How often a boot configuration is re-checked for files on disk (artifacts are not watched).")
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	// Everything that can be checked without a cluster is checked before touching one.
	cfg, err := configFrom(o)
	if err != nil {
		return err
	}
	if o.urlKeyFile != "" {
		if cfg.URLKey, err = boot.LoadURLKeyFile(o.urlKeyFile); err != nil {
			return fmt.Errorf("--url-key-file: %w", err)
		}
	} else {
		cfg.URLKey = make([]byte, boot.MinURLKeyBytes) // checked now, loaded from the cluster below
	}
	if _, err := boot.New(cfg); err != nil {
		return flagError(err)
	}

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := metalv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if o.urlKeyFile == "" {
		direct, err := client.New(restCfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("creating a client: %w", err)
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cfg.URLKey, err = boot.LoadOrCreateURLKey(lctx, direct, client.ObjectKey{Namespace: o.namespace, Name: o.urlKeySecret})
		cancel()
		if err != nil {
			return fmt.Errorf("--url-key-secret: %w", err)
		}
	}
	svc, err := boot.New(cfg)
	if err != nil {
		return flagError(err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme,
		// Only the served namespace's boot configurations and Secrets are cached (Servers are
		// cluster-scoped); managedFields are never read.
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{o.namespace: {}},
			DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := svc.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	listeners, err := boot.OpenListeners(svc.Config())
	if err != nil {
		return flagError(err)
	}
	if listeners.Media, err = boot.OpenMediaListener(svc.Config()); err != nil {
		_ = listeners.Close()
		return flagError(err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return svc.Serve(ctx, listeners) })); err != nil {
		_ = listeners.Close()
		return err
	}
	return mgr.Start(ctx)
}

// configFrom turns the flags into a Config; errors name the flag.
func configFrom(o options) (boot.Config, error) {
	cfg := boot.Config{
		Mode: dhcp.Mode(o.mode), Interface: o.iface, PublicURL: o.publicURL, LeaseTime: o.leaseTime,
		EFIBootFile: o.efiBootFile, ProbeDir: o.probeDir, IPXEDir: o.ipxeDir,
		HTTPBindAddress: o.httpAddr, TFTPBindAddress: o.tftpAddr, Namespace: o.namespace, RecheckInterval: o.recheck,
		MediaURL: o.mediaURL, MediaBindAddress: o.mediaAddr, FirmwareCacheDir: o.firmwareCacheDir,
	}
	var err error
	if cfg.ServerIP, err = parseAddr("--server-ip", o.serverIP, true); err != nil {
		return cfg, err
	}
	if cfg.SubnetMask, err = parseAddr("--dhcp-subnet-mask", o.subnetMask, false); err != nil {
		return cfg, err
	}
	if cfg.Router, err = parseAddr("--dhcp-router", o.router, false); err != nil {
		return cfg, err
	}
	if o.dhcpRange != "" {
		start, end, ok := strings.Cut(o.dhcpRange, "-")
		a, errA := netip.ParseAddr(strings.TrimSpace(start))
		b, errB := netip.ParseAddr(strings.TrimSpace(end))
		if !ok || errA != nil || errB != nil || !a.Is4() || !b.Is4() {
			return cfg, fmt.Errorf("--dhcp-range: %q is not start-end, e.g. 10.20.0.100-10.20.0.199", o.dhcpRange)
		}
		cfg.DHCPRangeStart, cfg.DHCPRangeEnd = a, b
	}
	if errs := validation.IsValidLabelValue(o.bootOperator); o.bootOperator == "" || len(errs) > 0 {
		return cfg, fmt.Errorf("--boot-operator: %q is not a label value naming a boot service (%s)", o.bootOperator, strings.Join(errs, "; "))
	}
	cfg.BootOperator = o.bootOperator
	if o.selector != "" {
		sel, err := labels.Parse(o.selector)
		if err != nil {
			return cfg, fmt.Errorf("--server-selector: %w", err)
		}
		cfg.ServerFilter = func(s *metalv1alpha1.Server) bool { return sel.Matches(labels.Set(s.Labels)) }
	}
	if o.namespace == "" {
		return cfg, errors.New("--namespace: required: the namespace of the boot configurations served")
	}
	if cfg.Interface == "" && cfg.Mode != dhcp.ModeOff {
		if cfg.Interface, err = interfaceHolding(cfg.ServerIP); err != nil {
			return cfg, fmt.Errorf("--interface: %w", err)
		}
	}
	return cfg, nil
}

// interfaceHolding names the interface of this host that has addr, the default of --interface:
// a boot service in the host's network namespace of a node (as config/default runs it, with
// --server-ip the node's address) serves the network that address is on.
func interfaceHolding(addr netip.Addr) (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing this host's interfaces: %w", err)
	}
	for _, iface := range ifaces {
		addrs, err := iface.Addrs()
		if err != nil {
			return "", fmt.Errorf("reading the addresses of %s: %w", iface.Name, err)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
					return iface.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface of this host has %s (--server-ip): name the provisioning network's interface", addr)
}

func parseAddr(flagName, v string, required bool) (netip.Addr, error) {
	if v == "" {
		if required {
			return netip.Addr{}, fmt.Errorf("%s: required", flagName)
		}
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%s: %q is not an IPv4 address", flagName, v)
	}
	return a, nil
}

// flagError rewrites a Config error to name the flag.
func flagError(err error) error {
	var ce *boot.ConfigError
	if errors.As(err, &ce) {
		if f, ok := flagOf[ce.Field]; ok {
			return fmt.Errorf("%s: %s", f, ce.Problem)
		}
	}
	return err
}
