// Package boot is Ironfleet's boot service: the boot operator that watches
// ServerBootConfigurations and network-boots the servers they name. DHCP (proxy or full, in
// dhcp/) hands a PXE ROM an iPXE binary over TFTP (tftp/); iPXE fetches a per-server script over
// HTTP that boots the probe's kernel and initramfs with a per-boot URL; the probe's /init
// fetches its ignition from that URL and reports its progress to it. A virtual-media boot
// (spec.bootMethod VirtualMedia) gets instead a per-boot ISO under the same URL (media.go), the
// template ISO with its ignition embedded, which the server's BMC mounts: no DHCP, TFTP or iPXE
// (dhcp.ModeOff runs none). See docs/boot.md.
package boot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/internal/boot/tftp"
	"github.com/ironfleet/ironfleet/internal/eventrec"
)

// Service is the boot service. New makes one, SetupWithManager gives it its cache and
// reconciler, Serve answers the network.
type Service struct {
	cfg    Config
	tokens tokenSigner
	leases *dhcp.LeaseTable // full mode; addresses only, nothing about boots
	store  *leaseStore      // full mode: leases kept across restarts (leases.go)
	media  *bootMedia       // the template ISO and the embeds being served
	// firmware is the firmware images downloaded for BMCs (firmware.go).
	firmware *firmwareCache

	// From the manager: client reads the cache, api reads the API server.
	client client.Client
	api    client.Reader
	cache  cache.Cache
	events events.EventRecorder
	log    logr.Logger
}

// New validates cfg (with defaults applied) and makes a service.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, tokens: tokenSigner{key: append([]byte(nil), cfg.URLKey...)}, log: ctrl.Log.WithName("boot-service")}
	if cfg.Mode == dhcp.ModeFull {
		s.leases = dhcp.NewLeaseTable(cfg.DHCPRangeStart, cfg.DHCPRangeEnd, cfg.ServerIP, cfg.LeaseTime, nil)
	}
	s.media = newBootMedia(cfg.ProbeDir, cfg.RecheckInterval)
	s.firmware = newFirmwareCache(cfg, s.log.WithName("firmware"))
	return s, nil
}

// Config is the service's configuration, defaults applied.
func (s *Service) Config() Config { return s.cfg }

// What the boot service may do, generated into config/boot-namespace/role.yaml (make manifests):
// read Servers (cluster-scoped); in the boot namespace only (--namespace, ironfleet-boot as
// shipped), read boot configurations and write their status, read their ignition Secrets,
// create the URL key's, create and update the boot media Secrets (virtual-media boots' ISO
// URLs), update the firmware image Secrets (their served-url), record events about them. That
// namespace holds the boots and nothing else: Secrets
// cannot be granted by label, and a watch cannot be limited to names, so the Secrets the
// service serves are fenced off by namespace from those it must not read (the registry's keys
// and the BMC credentials, in the manager's namespace). See docs/security.md.
//
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,namespace=ironfleet-boot,resources=serverbootconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,namespace=ironfleet-boot,resources=serverbootconfigurations/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",namespace=ironfleet-boot,resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,namespace=ironfleet-boot,resources=events,verbs=create;patch
//
// Full DHCP mode keeps its leases in one ConfigMap: create cannot be narrowed to a name.
// +kubebuilder:rbac:groups="",namespace=ironfleet-boot,resources=configmaps,resourceNames=ironfleet-boot-leases,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=ironfleet-boot,resources=configmaps,verbs=create

// SetupWithManager registers the indexes and the reconciler of boot configurations on mgr.
// The manager's cache must see Servers, ServerBootConfigurations and the ignition Secrets.
func (s *Service) SetupWithManager(mgr ctrl.Manager) error {
	s.client, s.api, s.cache = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetCache()
	rec, err := eventrec.For(mgr)
	if err != nil {
		return err
	}
	s.events = rec.Recorder(s.cfg.Name)
	s.log = mgr.GetLogger().WithName("boot-service")
	s.firmware.log = s.log.WithName("firmware")
	if s.leases != nil {
		s.store = newLeaseStore(s.leases, s.cfg.Namespace, s.api, s.client, s.log.WithName("dhcp-leases"))
	}
	// The template ISO is loaded now; when it cannot be, virtual-media boots are not Ready
	// (ArtifactMissing) and it is tried again when they are re-checked.
	if _, err := s.media.template(); err != nil {
		s.log.Info("no template ISO: virtual-media boots are not served until it loads", "dir", s.cfg.ProbeDir, "error", err.Error())
	}
	if err := s.indexFields(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// The firmware images asked of this service (firmware.go): their Secrets get served-url,
	// and a deleted one's image is removed.
	if err := ctrl.NewControllerManagedBy(mgr).
		Named(s.cfg.Name+"-firmware").
		For(&corev1.Secret{}, builder.WithPredicates(firmwareImageEvents())).
		WithOptions(controller.Options{UsePriorityQueue: ptr.To(false)}).
		Complete(reconcile.Func(s.reconcileFirmware)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(s.cfg.Name).
		For(&metalv1alpha1.ServerBootConfiguration{}).
		Watches(&metalv1alpha1.Server{}, handler.EnqueueRequestsFromMapFunc(s.bootConfigsOfServer),
			builder.WithPredicates(serverChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(s.bootConfigsOfSecret)).
		Owns(&corev1.Secret{}). // the boot media Secrets: one changed or deleted is written again
		WithOptions(controller.Options{
			// The classic queue: v0.24's priority queue can hang a manager's shutdown
			// (internal/controller/settings.go).
			UsePriorityQueue: ptr.To(false),
		}).
		Complete(s)
}

// serverChanged passes the Server events that can change a boot's verdict: a server appearing
// or going, its MACs, its labels (the server filter). Power and state changes are not.
func serverChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, oldOK := e.ObjectOld.(*metalv1alpha1.Server)
			cur, curOK := e.ObjectNew.(*metalv1alpha1.Server)
			if !oldOK || !curOK {
				return true
			}
			return !equality.Semantic.DeepEqual(serverMACs(old), serverMACs(cur)) ||
				!equality.Semantic.DeepEqual(old.Labels, cur.Labels)
		},
	}
}

func (s *Service) bootConfigsOfServer(ctx context.Context, o client.Object) []reconcile.Request {
	return s.requests(ctx, client.MatchingFields{indexServerRef: o.GetName()})
}

func (s *Service) bootConfigsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	return s.requests(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexIgnitionRef: o.GetName()})
}

func (s *Service) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list metalv1alpha1.ServerBootConfigurationList
	if err := s.client.List(ctx, &list, opts...); err != nil {
		s.log.Error(err, "listing boot configurations to re-check")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Listeners are the sockets the service answers on. The caller may open them itself (the lab
// opens them from a thread inside a network namespace); Serve takes them over and closes them.
// A nil socket is a protocol not served (HTTP is required).
type Listeners struct {
	// DHCP is UDP port 67, bound to the provisioning interface with broadcast allowed
	// (server4.NewIPv4UDPConn).
	DHCP net.PacketConn
	// PXE is UDP port 4011, where PXE clients and iPXE send ProxyDHCP requests (proxy mode).
	PXE net.PacketConn
	// TFTP is UDP port 69.
	TFTP net.PacketConn
	// HTTP serves scripts, artifacts and the per-boot URLs.
	HTTP net.Listener
	// Media, when Config.MediaBindAddress is set, serves the same handler there: where BMCs
	// fetch virtual-media ISOs (OpenMediaListener opens it; OpenListeners does not, so that
	// it can be opened in another network namespace than the others). Required then.
	Media net.Listener
}

// Close closes every socket that is open.
func (l Listeners) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{l.DHCP, l.PXE, l.TFTP, l.HTTP, l.Media} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// OpenListeners opens the sockets cfg asks for: DHCP on port 67 (and 4011 in proxy mode) bound
// to cfg.Interface (none in dhcp.ModeOff), TFTP on cfg.TFTPBindAddress, HTTP on
// cfg.HTTPBindAddress. It opens them in the calling thread's network namespace. It does not
// open Listeners.Media: see OpenMediaListener. Errors name the Config field.
func OpenListeners(cfg Config) (Listeners, error) {
	cfg = cfg.withDefaults()
	var l Listeners
	fail := func(field string, err error) (Listeners, error) {
		_ = l.Close()
		return Listeners{}, &ConfigError{Field: field, Problem: err.Error()}
	}
	if cfg.Mode != dhcp.ModeOff {
		if err := openDHCP(cfg, &l); err != nil {
			return fail("Interface", err)
		}
	}
	t, err := net.ListenPacket("udp4", cfg.TFTPBindAddress)
	if err != nil {
		return fail("TFTPBindAddress", fmt.Errorf("listening for TFTP: %w", err))
	}
	l.TFTP = t
	h, err := net.Listen("tcp", cfg.HTTPBindAddress)
	if err != nil {
		return fail("HTTPBindAddress", fmt.Errorf("listening for HTTP: %w", err))
	}
	l.HTTP = h
	return l, nil
}

// OpenMediaListener opens the listener of cfg.MediaBindAddress (Listeners.Media) in the calling
// thread's network namespace; nil, nil when it is not set. Errors name the Config field.
func OpenMediaListener(cfg Config) (net.Listener, error) {
	if cfg.MediaBindAddress == "" {
		return nil, nil
	}
	m, err := net.Listen("tcp", cfg.MediaBindAddress)
	if err != nil {
		return nil, &ConfigError{Field: "MediaBindAddress", Problem: fmt.Sprintf("listening for HTTP (virtual media): %v", err)}
	}
	return m, nil
}

// openDHCP opens the DHCP sockets on cfg.Interface.
func openDHCP(cfg Config, l *Listeners) error {
	if cfg.Interface == "" {
		return errors.New("required: the provisioning network's interface, for the DHCP sockets")
	}
	conn, err := server4.NewIPv4UDPConn(cfg.Interface, &net.UDPAddr{Port: dhcpv4.ServerPort})
	if err != nil {
		return fmt.Errorf("opening DHCP port 67 on %s: %w", cfg.Interface, err)
	}
	l.DHCP = conn
	if cfg.Mode == dhcp.ModeProxy {
		pxe, err := server4.NewIPv4UDPConn(cfg.Interface, &net.UDPAddr{Port: int(dhcp.PortPXE)})
		if err != nil {
			return fmt.Errorf("opening PXE port 4011 on %s: %w", cfg.Interface, err)
		}
		l.PXE = pxe
	}
	return nil
}

// Serve answers on l until ctx ends, then closes l and returns nil; it returns early with the
// first socket's error. It waits for the manager's cache first: a request is only answered
// from a synced cache.
func (s *Service) Serve(ctx context.Context, l Listeners) error {
	if l.HTTP == nil {
		_ = l.Close()
		return errors.New("boot service: no HTTP listener")
	}
	if s.cfg.Mode == dhcp.ModeOff && (l.DHCP != nil || l.PXE != nil) {
		_ = l.Close()
		return errors.New("boot service: DHCP mode off, but a DHCP socket was given")
	}
	if s.cfg.MediaBindAddress != "" && l.Media == nil {
		_ = l.Close()
		return errors.New("boot service: MediaBindAddress is set but Listeners.Media is nil (open it with OpenMediaListener)")
	}
	if s.cache == nil {
		_ = l.Close()
		return errors.New("boot service: SetupWithManager must be called before Serve")
	}
	if !s.cache.WaitForCacheSync(ctx) {
		_ = l.Close()
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("boot service: the cache did not sync")
	}
	if s.store != nil {
		// Before the first DHCP answer: without them a leased address could be offered again.
		if err := s.store.load(ctx); err != nil {
			_ = l.Close()
			return err
		}
	}
	// Firmware images an earlier process downloaded, and those whose Secrets went meanwhile.
	if err := s.sweepFirmware(ctx); err != nil {
		s.log.Error(err, "removing the firmware images no Secret asks for")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				once.Do(func() { first = fmt.Errorf("boot service %s: %w", name, err) })
				cancel()
			}
		}()
	}

	// One server, one handler, on both HTTP listeners: Shutdown closes both.
	srv := newHTTPServer(s.Handler(), defaultHTTPTimeouts)
	for _, hl := range []struct {
		name string
		l    net.Listener
	}{{"HTTP", l.HTTP}, {"HTTP (virtual media)", l.Media}} {
		if hl.l == nil {
			continue
		}
		run(hl.name, func() error {
			if err := srv.Serve(hl.l); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shutdown)
	}()
	if l.TFTP != nil {
		ts := &tftp.Server{Open: s.tftpOpener(), Log: s.log.WithName("tftp"),
			OnSent: func(n int64) { tftpBytes.Add(float64(n)) }, OnError: func(k string) { tftpErrors.WithLabelValues(k).Inc() }}
		run("TFTP", func() error { return ts.Serve(ctx, l.TFTP) })
	}
	if s.store != nil {
		run("DHCP leases", func() error { s.store.run(ctx); return nil })
	}
	ds := s.dhcpServer()
	for _, sock := range []struct {
		conn net.PacketConn
		port dhcp.Port
	}{{l.DHCP, dhcp.PortDHCP}, {l.PXE, dhcp.PortPXE}} {
		if sock.conn != nil {
			run(fmt.Sprintf("DHCP port %d", sock.port), func() error { return ds.Serve(ctx, sock.conn, sock.port) })
		}
	}
	kv := []any{"mode", s.cfg.Mode, "publicURL", s.cfg.PublicURL, "mediaURL", s.cfg.MediaURL, "http", l.HTTP.Addr().String()}
	if l.Media != nil {
		kv = append(kv, "media", l.Media.Addr().String())
	}
	s.log.Info("boot service serving", kv...)
	wg.Wait()
	return first
}

// dhcpServer is the DHCP side, answering the MACs of servers with a Ready boot.
func (s *Service) dhcpServer() *dhcp.Server {
	return &dhcp.Server{
		Handler: &dhcp.Handler{Config: s.dhcpConfig(), Lookup: s.dhcpBoot, Leases: s.leases},
		OnReply: func(m dhcp.Mode, reply *dhcpv4.DHCPv4) {
			dhcpReplies.WithLabelValues(string(m), reply.MessageType().String()).Inc()
			if loaderReason(reply.BootFileName) != "" {
				go s.noteLoader(reply.ClientHWAddr, reply.BootFileName)
			}
		},
		OnIgnored: func(r dhcp.Reason) { dhcpIgnored.WithLabelValues(string(r)).Inc() },
		Log:       s.log.WithName("dhcp"),
	}
}

func (s *Service) dhcpConfig() dhcp.Config {
	c := dhcp.Config{Mode: s.cfg.Mode, ServerIP: s.cfg.ServerIP, EFIBootFile: s.cfg.EFIBootFile,
		Router: s.cfg.Router, LeaseTime: s.cfg.LeaseTime,
		ScriptURL: func(mac net.HardwareAddr) string { return s.cfg.PublicURL + "/ipxe/" + mac.String() },
		LoaderURL: func(file string) string { return s.cfg.PublicURL + loadersPath + file }}
	if s.cfg.Mode == dhcp.ModeFull {
		c.SubnetMask, _ = s.cfg.mask()
	}
	return c
}

// dhcpBoot is what DHCP needs of the Ready boot this service serves a NIC's MAC: false when
// there is none.
func (s *Service) dhcpBoot(mac net.HardwareAddr) (dhcp.Boot, bool) {
	t := s.dhcpTarget(mac)
	if t == nil {
		return dhcp.Boot{}, false
	}
	return dhcp.Boot{SecureBoot: secureBoot(t.server), AddressOnly: uriBoot(t.sbc)}, true
}

// dhcpTarget is the Ready boot of a DHCP client's MAC; nil when there is none, or when it
// cannot be looked up (logged: the client asks again).
func (s *Service) dhcpTarget(mac net.HardwareAddr) *target {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	t, err := s.targetByMAC(ctx, mac)
	if err != nil {
		s.log.Error(err, "looking up a DHCP client", "mac", mac.String())
		return nil
	}
	return t
}
