package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/api/meta"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/identity"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/cli"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// Boot is one network boot the boot service served.
type Boot struct {
	Server  string
	Purpose metalv1alpha1.BootPurpose
	Image   string
	Time    time.Time
	Err     error
}

// LabelUnserved marks a boot configuration the lab's boot service leaves alone: the
// benchmark's object-model floor plays the boot service itself and writes its status.
const LabelUnserved = "lab.ironfleet.dev/unserved"

// BootService plays the external boot operator: it marks ServerBootConfigurations Ready, and
// when a simulated server powers on from PXE it "boots" what the configuration asks for — the
// real metalprobe, in-process, on that host's hardware tree, for discovery, wipe and install
// (onto the host's disk files); a claim's own image (another boot operator's configuration,
// owned by the claim) is recorded, with nothing to run.
type BootService struct {
	// Client talks to the API directly: a PXE request is answered with the configuration and
	// ignition as they are, not as a cache last saw them.
	Client client.Client
	// watched reads the configurations the reconciler watches: the cache of the manager it is
	// set up on (Client until then). Marking one Ready needs no fresher copy: a stale one is
	// marked again, a deleted one is not found.
	watched client.Reader
	Log     logr.Logger
	// Probe boots metalprobe on a host with the ignition served: runProbe (the real command
	// line, the default) or InstantProbes (the benchmark's).
	Probe func(ctx context.Context, ign []byte, host Host) error
	// RegistryURL, when set, is where the in-process probes report instead of the URL in
	// their ignition: the lab's VMs reach the registry on their private bridge, which the
	// simulated hosts (on the host's loopback) cannot.
	RegistryURL string
	// Skip names the hosts (by their own UUID, Host.UUID) this boot service leaves to another:
	// the lab's VMs, which Ironfleet's own boot service boots over a real network.
	Skip func(uuid string) bool

	mu    sync.Mutex
	hosts map[string]Host // by the host's own UUID (Host.UUID)
	held  map[string][]func()
	hold  map[string]bool
	boots []Boot
	wg    sync.WaitGroup
	ctx   context.Context
}

// NewBootService returns a boot service whose probe runs end when ctx does.
func NewBootService(ctx context.Context, c client.Client, log logr.Logger) *BootService {
	return &BootService{Client: c, watched: c, Log: log, Probe: runProbe, ctx: ctx, hosts: map[string]Host{}, held: map[string][]func(){}, hold: map[string]bool{}}
}

// AddHost makes a host bootable: its probe runs on its tree.
func (b *BootService) AddHost(h Host) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hosts[h.UUID] = h
}

// Hold queues the host's boots until Release: a probe that is booting but has not reported.
func (b *BootService) Hold(uuid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold[uuid] = true
}

// Release runs the host's queued boots and stops holding it.
func (b *BootService) Release(uuid string) {
	b.mu.Lock()
	queued := b.held[uuid]
	delete(b.held, uuid)
	delete(b.hold, uuid)
	b.mu.Unlock()
	for _, run := range queued {
		b.goRun(run)
	}
}

// Boots returns what was booted so far.
func (b *BootService) Boots() []Boot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Boot(nil), b.boots...)
}

// Wait waits for running probes to finish.
func (b *BootService) Wait() { b.wg.Wait() }

// PowerOn is a bmcsim power-on hook. A PXE boot runs asynchronously: a real host takes time to
// boot, and the BMC has long answered the reset by then.
func (b *BootService) PowerOn(ev bmcsim.PowerOnEvent) {
	if ev.Boot != bmcsim.BootPxe || b.skips(ev.UUID) {
		return
	}
	run := func() { b.pxeBoot(ev) }
	b.mu.Lock()
	if b.hold[ev.UUID] {
		b.held[ev.UUID] = append(b.held[ev.UUID], run)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.goRun(run)
}

func (b *BootService) goRun(run func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		run()
	}()
}

// pxeBoot finds what the server's boot configuration serves and boots it.
func (b *BootService) pxeBoot(ev bmcsim.PowerOnEvent) {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	boot, err := b.serve(ctx, ev)
	boot.Time, boot.Err = time.Now(), err
	if err != nil {
		b.Log.Info("PXE boot failed", "uuid", ev.UUID, "error", err.Error())
	}
	b.mu.Lock()
	b.boots = append(b.boots, boot)
	b.mu.Unlock()
}

func (b *BootService) serve(ctx context.Context, ev bmcsim.PowerOnEvent) (Boot, error) {
	b.mu.Lock()
	host, ok := b.hosts[ev.UUID]
	b.mu.Unlock()
	var server *metalv1alpha1.Server
	var err error
	if ok && host.BMC != "" {
		server, err = b.serverBehind(ctx, host.BMC, ev.SystemID, ev.UUID)
	} else {
		server, err = b.serverByUUID(ctx, ev.UUID)
	}
	if err != nil {
		return Boot{}, err
	}
	boot := Boot{Server: server.Name}
	sbc, err := b.readyBootConfig(ctx, server)
	if err != nil {
		return boot, err
	}
	boot.Purpose, boot.Image = sbc.Spec.Purpose, sbc.Spec.Image
	if sbc.Spec.Purpose == metalv1alpha1.BootPurposeProvisioning && !probeBoot(sbc) {
		return boot, nil // another boot operator's image, served as it is: recorded, nothing to run
	}
	ign, err := b.ignition(ctx, sbc)
	if err != nil {
		return boot, err
	}
	if !ok {
		return boot, fmt.Errorf("no hardware tree for host %s: the probe cannot run", ev.UUID)
	}
	if err := host.publishBIOSVersion(ev.BIOSVersion); err != nil {
		return boot, fmt.Errorf("publishing host %s's BIOS version: %w", ev.UUID, err)
	}
	if b.RegistryURL != "" {
		if ign, err = withRegistryURL(ign, b.RegistryURL); err != nil {
			return boot, err
		}
	}
	return boot, b.Probe(ctx, ign, host)
}

// probeBoot says whether a boot configuration is one of the operator's probe boots (each names
// its boot; older ones were owned by their Server), rather than a claim's own image for another
// boot operator.
func probeBoot(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	if sbc.Annotations[metalv1alpha1.AnnotationProbeBoot] != "" {
		return true
	}
	for _, ref := range sbc.OwnerReferences {
		if ref.Kind == "Server" {
			return true
		}
	}
	return false
}

func (b *BootService) skips(uuid string) bool {
	return b.Skip != nil && b.Skip(strings.ToLower(uuid))
}

// withRegistryURL is the ignition with another registry URL.
func withRegistryURL(ign []byte, url string) ([]byte, error) {
	cfg, err := ignition.Parse(ign)
	if err != nil {
		return nil, err
	}
	cfg.RegistryURL = url
	return ignition.Render(cfg)
}

// serverBehind finds the server a PXE request came from by the BMC and system Id its host sits
// behind, which the lab knows (a real boot service knows the NIC's MAC): its UUID may be
// missing, a placeholder, or shared. A server is named after its UUID when that identifies it,
// so that name is tried first: one Get, where listing the BMC's servers by label makes the
// apiserver filter the whole fleet on every PXE boot (at ten thousand servers, a hundred
// million label matches over an enrollment, on the machine the benchmark measures).
func (b *BootService) serverBehind(ctx context.Context, bmcName, systemID, uuid string) (*metalv1alpha1.Server, error) {
	if identity.Usable(uuid) {
		var server metalv1alpha1.Server
		err := b.Client.Get(ctx, client.ObjectKey{Name: identity.Normalize(uuid)}, &server)
		if err == nil && server.Spec.BMCRef != nil && server.Spec.BMCRef.Name == bmcName && strings.EqualFold(systemIDOf(&server), systemID) {
			return &server, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	// Which server is the system is read from the watched cache: a Server's BMC and system
	// never change.
	var servers metalv1alpha1.ServerList
	if err := b.watched.List(ctx, &servers, client.MatchingLabels{metalv1alpha1.LabelBMC: bmcName}); err != nil {
		return nil, err
	}
	for i := range servers.Items {
		s := &servers.Items[i]
		if s.Spec.BMCRef != nil && s.Spec.BMCRef.Name == bmcName && strings.EqualFold(systemIDOf(s), systemID) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no server of BMC %s is system %s", bmcName, systemID)
}

// serverByUUID finds the server a PXE request came from by its host's UUID, for hosts added
// without their BMC (tests whose systems have good UUIDs). Servers are named after their UUID
// when they have one, so that is one Get; only a server with a fallback name needs the list.
func (b *BootService) serverByUUID(ctx context.Context, uuid string) (*metalv1alpha1.Server, error) {
	var server metalv1alpha1.Server
	err := b.Client.Get(ctx, client.ObjectKey{Name: uuid}, &server)
	if err == nil && server.Spec.SystemUUID == uuid {
		return &server, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	var servers metalv1alpha1.ServerList
	if err := b.watched.List(ctx, &servers); err != nil {
		return nil, err
	}
	for i := range servers.Items {
		if servers.Items[i].Spec.SystemUUID == uuid {
			return &servers.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no server has UUID %s", uuid)
}

// readyBootConfig is the server's Ready boot configuration: what a PXE request is answered with.
// Its candidates are found in the watched cache (the configurations this boot service marks
// Ready, so it has seen each one before it is Ready), and each is read again from the API: the
// request is answered with the configuration as it is. A label-selected LIST from the API would
// make the apiserver filter every configuration of the fleet on each PXE boot.
func (b *BootService) readyBootConfig(ctx context.Context, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	var list metalv1alpha1.ServerBootConfigurationList
	if err := b.watched.List(ctx, &list, client.MatchingLabels{metalv1alpha1.LabelServer: server.Name}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Spec.ServerRef.Name != server.Name || !list.Items[i].DeletionTimestamp.IsZero() {
			continue
		}
		var sbc metalv1alpha1.ServerBootConfiguration
		if err := b.Client.Get(ctx, client.ObjectKeyFromObject(&list.Items[i]), &sbc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if sbc.Spec.ServerRef.Name == server.Name && sbc.DeletionTimestamp.IsZero() && sbc.Status.State == metalv1alpha1.BootConfigurationStateReady {
			return &sbc, nil
		}
	}
	return nil, fmt.Errorf("server %s PXE-booted but has no Ready boot configuration", server.Name)
}

// ignition is what the boot service serves the probe: the rendered config in the Secret.
func (b *BootService) ignition(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration) ([]byte, error) {
	if sbc.Spec.IgnitionSecretRef == nil {
		return nil, fmt.Errorf("boot configuration %s has no ignition", sbc.Name)
	}
	var secret corev1.Secret
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: sbc.Namespace, Name: sbc.Spec.IgnitionSecretRef.Name}, &secret); err != nil {
		return nil, err
	}
	data, ok := secret.Data[ignition.SecretKey]
	if !ok {
		return nil, fmt.Errorf("ignition Secret %s has no %s", secret.Name, ignition.SecretKey)
	}
	return data, nil
}

// runProbe boots metalprobe in-process: the real command line, on the host's hardware tree,
// with the ignition the boot service serves. It discovers or wipes as the ignition says.
func runProbe(_ context.Context, ign []byte, host Host) error {
	f, err := os.CreateTemp("", "ignition-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(ign); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var stderr bytes.Buffer
	if code := cli.Run([]string{"--root", host.Root, "--ignition", f.Name()}, io.Discard, &stderr); code != 0 {
		return fmt.Errorf("metalprobe exited %d: %s", code, lastLines(stderr.String(), 3))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Reconcile marks a boot configuration Ready: the lab's boot service can serve any image.
func (b *BootService) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := b.watched.Get(ctx, req.NamespacedName, &sbc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if sbc.Status.State == metalv1alpha1.BootConfigurationStateReady || !sbc.DeletionTimestamp.IsZero() || b.skips(sbc.Spec.ServerRef.Name) ||
		sbc.Labels[LabelUnserved] != "" {
		return ctrl.Result{}, nil
	}
	original := sbc.DeepCopy()
	sbc.Status.State = metalv1alpha1.BootConfigurationStateReady
	metav1.SetStatusCondition(&sbc.Status.Conditions, v1.Condition{Type: metalv1alpha1.ConditionReady, Status: v1.ConditionTrue,
		Reason: "Served", Message: "the lab boot service serves " + sbc.Spec.Image, ObservedGeneration: sbc.Generation})
	return ctrl.Result{}, client.IgnoreNotFound(b.Client.Status().Patch(ctx, &sbc, client.MergeFrom(original)))
}

// SetupWithManager runs the boot service's reconciler on mgr (a manager of its own, not the
// operator's: the boot service is an external system).
func (b *BootService) SetupWithManager(mgr ctrl.Manager) error {
	b.watched = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("lab-boot-service").For(&metalv1alpha1.ServerBootConfiguration{}).Complete(b)
}
