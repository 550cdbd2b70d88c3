package controller_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// pool is a simulated BMC whose systems all have hosts, enrolled and discovered.
type pool struct {
	name  string
	sim   *bmcsim.BMC
	hosts map[string]lab.Host // by server name (the system UUID)
}

// startPool starts a BMC with one system per fixture given, makes their hosts bootable, enrolls
// the BMC, and waits until every server is Available.
func startPool(t *testing.T, name string, first int, fixtureOf []string) *pool {
	t.Helper()
	return startPoolWith(t, name, first, fixtureOf, bmcsim.Options{})
}

// startPoolWith is startPool with a BMC of its own kind: opts' profile and quirks (its
// credentials and systems are the pool's).
func startPoolWith(t *testing.T, name string, first int, fixtureOf []string, opts bmcsim.Options) *pool {
	t.Helper()
	return startPoolOf(t, name, first, fixtureOf, opts, nil)
}

// startPoolOf is startPoolWith whose hosts' trees prepare changes (the i-th host's) before
// anything boots them.
func startPoolOf(t *testing.T, name string, first int, fixtureOf []string, opts bmcsim.Options, prepare func(i int, host *lab.Host)) *pool {
	t.Helper()
	specs := make([]bmcsim.SystemSpec, len(fixtureOf))
	p := &pool{name: name, hosts: map[string]lab.Host{}}
	for i, fixture := range fixtureOf {
		specs[i] = testSystem(first + i)
		host, err := lab.PrepareHost(fixture, t.TempDir(), specs[i].UUID)
		require.NoError(t, err)
		if prepare != nil {
			prepare(i, &host)
		}
		boots.AddHost(host)
		p.hosts[host.UUID] = host
	}
	opts.Username, opts.Password, opts.Systems = goodUser, goodPassword, specs
	sim, err := bmcsim.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	sim.OnPowerOn(boots.PowerOn)
	p.sim = sim
	createSecret(t, name, goodUser, goodPassword)
	createDirectBMC(t, name, "redfish+http://"+sim.Host()+"/redfish/v1", name)
	start := time.Now()
	eventually(t, 120*time.Second, func() bool { return countServers(t, name, m.ServerStateAvailable) == len(fixtureOf) },
		"all %d servers of %s Available", len(fixtureOf), name)
	t.Logf("pool %s: %d servers enrolled and discovered in %v", name, len(fixtureOf), time.Since(start).Round(time.Millisecond))
	return p
}

// startOneServer starts a pool of one small server, and a namespace of the same name for its
// claims; it returns the pool and the server's name.
func startOneServer(t *testing.T, name string, system int) (*pool, string) {
	t.Helper()
	return startOneServerWith(t, name, system, bmcsim.Options{})
}

// startOneServerWith is startOneServer behind a BMC of opts' profile and quirks.
func startOneServerWith(t *testing.T, name string, system int, opts bmcsim.Options) (*pool, string) {
	t.Helper()
	p := startPoolWith(t, name, system, []string{"small-vm"}, opts)
	createNamespace(t, name)
	for server := range p.hosts {
		return p, server
	}
	t.Fatalf("pool %s has no server", name)
	return nil, ""
}

func poolServers(t *testing.T, name string) []m.Server {
	t.Helper()
	var list m.ServerList
	require.NoError(t, k8s.List(context.Background(), &list, client.MatchingLabels{m.LabelBMC: name}))
	return list.Items
}

func countServers(t *testing.T, name string, state m.ServerState) int {
	n := 0
	for _, s := range poolServers(t, name) {
		if s.Status.State == state {
			n++
		}
	}
	return n
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

func poolClaim(ns, name, poolName string) *m.ServerClaim {
	return &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: m.ServerClaimSpec{
		ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{m.LabelBMC: m.LabelValue(poolName)}},
	}}
}

func claimsIn(t *testing.T, ns string) []m.ServerClaim {
	t.Helper()
	var list m.ServerClaimList
	require.NoError(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	return list.Items
}

// bindingInvariants checks, from both sides, that no server is held by two claims and no
// claim holds two servers.
// Each side is one List, a consistent snapshot; the two snapshots are taken at different
// moments, so they are compared only for agreement (consistent reports it), never for failure.
func bindingInvariants(t *testing.T, ns, poolName string) (bound int, consistent bool) {
	serverOfClaim := map[string]string{}
	for _, s := range poolServers(t, poolName) {
		if ref := s.Spec.ServerClaimRef; ref != nil && ref.Namespace == ns {
			if prev, dup := serverOfClaim[ref.Name]; dup {
				t.Errorf("claim %s holds two servers: %s and %s", ref.Name, prev, s.Name)
			}
			serverOfClaim[ref.Name] = s.Name
		}
	}
	claimOfServer := map[string]string{}
	consistent = true
	for _, c := range claimsIn(t, ns) {
		if c.Status.Phase != m.ClaimPhaseBound {
			continue
		}
		bound++
		server := c.Status.ServerRef.Name
		if prev, dup := claimOfServer[server]; dup {
			t.Errorf("server %s is held by two claims: %s and %s", server, prev, c.Name)
		}
		claimOfServer[server] = c.Name
		consistent = consistent && serverOfClaim[c.Name] == server
	}
	return bound, consistent && len(serverOfClaim) == bound
}

// settled waits until want claims are Bound and every other claim is Pending for want of a
// server; the binding invariants hold at every observation on the way.
func settledClaims(t *testing.T, ns, poolName string, total, want int) {
	t.Helper()
	eventually(t, 180*time.Second, func() bool {
		bound, consistent := bindingInvariants(t, ns, poolName)
		if bound != want || !consistent {
			return false
		}
		for _, c := range claimsIn(t, ns) {
			if c.Status.Phase == m.ClaimPhaseBound {
				continue
			}
			cond := meta.FindStatusCondition(c.Status.Conditions, m.ConditionBound)
			if cond == nil || cond.Reason != m.ClaimReasonNoMatchingServer {
				return false
			}
		}
		return len(claimsIn(t, ns)) == total
	}, "%d of %d claims Bound, the rest Pending with NoMatchingServer", want, total)
}

func deleteClaims(t *testing.T, claims []m.ServerClaim) {
	t.Helper()
	for i := range claims {
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(context.Background(), &claims[i])))
	}
}

// TestClaimRace: 200 claims created at once against 50 matching servers bind exactly 50; no
// server is held twice and no claim holds two; deleting 10 bound claims lets exactly 10 waiting
// claims bind once the released servers are wiped. The race is run several times.
func TestClaimRace(t *testing.T) {
	ctx := context.Background()
	fixtures := make([]string, 50)
	for i := range fixtures {
		fixtures[i] = "small-vm"
	}
	p := startPool(t, "race", 100, fixtures)

	for round := 1; round <= 3; round++ {
		ns := fmt.Sprintf("race-%d", round)
		createNamespace(t, ns)
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < 200; i += 16 {
					errs <- k8s.Create(ctx, poolClaim(ns, fmt.Sprintf("claim-%03d", i), p.name))
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		start := time.Now()
		settledClaims(t, ns, p.name, 200, 50)
		t.Logf("round %d: 200 claims settled in %v", round, time.Since(start).Round(time.Millisecond))

		if round == 1 {
			var bound []m.ServerClaim
			for _, c := range claimsIn(t, ns) {
				if c.Status.Phase == m.ClaimPhaseBound && len(bound) < 10 {
					bound = append(bound, c)
				}
			}
			released := map[string]bool{}
			for _, c := range bound {
				released[c.Status.ServerRef.Name] = true
			}
			deleteClaims(t, bound)
			settledClaims(t, ns, p.name, 190, 50)
			for name := range released {
				var s m.Server
				require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
				assert.True(t, meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionCleaned), "released server %s was wiped before it was bound again", name)
			}
		}

		// Give every server back and wait for the pool to be clean and Available again.
		start = time.Now()
		deleteClaims(t, claimsIn(t, ns))
		eventually(t, 180*time.Second, func() bool { return len(claimsIn(t, ns)) == 0 && countServers(t, p.name, m.ServerStateAvailable) == 50 },
			"round %d: every server wiped and Available again", round)
		t.Logf("round %d: 50 servers released, wiped and Available in %v", round, time.Since(start).Round(time.Millisecond))
	}
}

// TestUnsatisfiableClaimStaysPending: a claim asking for more memory than any server has.
func TestUnsatisfiableClaimStaysPending(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "greedy")
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "greedy", Name: "huge"},
		Spec: m.ServerClaimSpec{MinMemory: ptr.To(resource.MustParse("64Ti"))}}
	require.NoError(t, k8s.Create(ctx, claim))
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		c := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionBound)
		return c != nil && c.Reason == m.ClaimReasonNoMatchingServer
	})
	// It says what no server has (or, in a moment when the suite's pool is empty, that).
	assert.Contains(t, []string{
		"no Available server has 64Ti of memory or more (spec.minMemory); the claim binds as soon as one does",
		"no server is Available; the claim binds as soon as one is",
	}, meta.FindStatusCondition(claim.Status.Conditions, m.ConditionBound).Message)
	assert.Equal(t, m.ClaimPhasePending, claim.Status.Phase)
	assert.Nil(t, claim.Status.ServerRef)
	var servers m.ServerList
	require.NoError(t, k8s.List(ctx, &servers, client.MatchingFields{}))
	for _, s := range servers.Items {
		if ref := s.Spec.ServerClaimRef; ref != nil {
			assert.NotEqual(t, "huge", ref.Name)
		}
	}
}

// claimServer creates a claim for one named server and waits until it is Reserved for it.
func claimServer(t *testing.T, ns, name, server string, mutate func(*m.ServerClaim)) *m.ServerClaim {
	t.Helper()
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: server}}}
	if mutate != nil {
		mutate(claim)
	}
	require.NoError(t, k8s.Create(context.Background(), claim))
	eventually(t, 30*time.Second, func() bool {
		var s m.Server
		return k8s.Get(context.Background(), client.ObjectKey{Name: server}, &s) == nil && s.Status.State == m.ServerStateReserved
	}, "server %s Reserved for claim %s", server, name)
	return claim
}

func waitServer(t *testing.T, name string, state m.ServerState, timeout time.Duration) *m.Server {
	t.Helper()
	var s m.Server
	if !assert.Eventually(t, func() bool {
		return k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s) == nil && s.Status.State == state
	}, timeout, 50*time.Millisecond, "server %s reaches %s", name, state) {
		t.Logf("last seen: state %s, reason %s, conditions %+v", s.Status.State, s.Status.LastTransitionReason, s.Status.Conditions)
		t.FailNow()
	}
	return &s
}

// servedImage says whether the lab's boot service has served the image to the server.
func servedImage(server, image string) bool {
	for _, b := range boots.Boots() {
		if b.Server == server && b.Purpose == m.BootPurposeProvisioning && b.Image == image {
			return true
		}
	}
	return false
}

func releaseAndWait(t *testing.T, claim *m.ServerClaim) {
	t.Helper()
	require.NoError(t, k8s.Delete(context.Background(), claim))
	eventually(t, 20*time.Second, func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(claim), &m.ServerClaim{}) != nil
	}, "claim %s is gone", claim.Name)
}

// diskZero reports whether [from, to) of a host's disk file is all zero.
func diskZero(t *testing.T, host lab.Host, disk string, from, to int64) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(host.Root, "dev", disk))
	require.NoError(t, err)
	return bytes.Count(data[from:to], []byte{0}) == int(to-from)
}

// TestReleaseWipesEveryDiskAsAsked: after release, with the default policy (erase: a fixture's
// disk files have no erase of their own, so zeros) and with zero every byte of every disk is
// zero; with metadata its ranges are zero (and the middle is not), and a Warning event
// MetadataWipeOnly says the data is still readable. Only the metadata release records it.
func TestReleaseWipesEveryDiskAsAsked(t *testing.T) {
	ctx := context.Background()
	p := startPool(t, "wipes", 200, []string{"dual-socket", "storage-1u", "small-vm"})
	createNamespace(t, "wipes")
	policies := []m.WipePolicy{"", m.WipeMetadata, m.WipeZero}
	names := slices.Sorted(maps.Keys(p.hosts))
	for i, name := range names {
		host, policy := p.hosts[name], policies[i]
		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
		assert.Equal(t, m.WipeErase, s.Spec.WipePolicy, "the CRD's default")
		if policy != "" {
			before := s.DeepCopy()
			s.Spec.WipePolicy = policy
			require.NoError(t, k8s.Patch(ctx, &s, client.MergeFrom(before)))
		} else {
			policy = m.WipeErase
		}

		claim := claimServer(t, "wipes", "tenant-"+name[:8], name, nil)
		releaseAndWait(t, claim)
		s = *waitServer(t, name, m.ServerStateAvailable, 60*time.Second)
		require.NotNil(t, s.Status.LastWipe)
		assert.Equal(t, policy, s.Status.LastWipe.Policy)

		size := int64(lab.DiskBytes)
		var wiped []string
		for _, d := range s.Status.LastWipe.Disks {
			assert.True(t, d.Succeeded, "disk %s: %s", d.Name, d.Message)
			wiped = append(wiped, d.Name)
			if policy == m.WipeErase {
				assert.Equal(t, wipe.MethodZero, d.Method, "%s: a disk file has no erase of its own", d.Name)
				assert.Contains(t, d.Message, "zeroed all")
				assert.Contains(t, d.Message, "read back all")
			}
		}
		for _, disk := range host.Disks { // removable ones too
			assert.Contains(t, wiped, disk)
			switch policy {
			case m.WipeMetadata:
				for _, r := range wipe.MetadataRanges(size) {
					assert.True(t, diskZero(t, host, disk, r[0], r[1]), "%s/%s: metadata range %v is zero", name, disk, r)
				}
				assert.False(t, diskZero(t, host, disk, wipe.MetadataBytes, size-wipe.MetadataBytes), "%s/%s: the metadata wipe leaves the middle alone", name, disk)
			case m.WipeZero, m.WipeErase:
				assert.True(t, diskZero(t, host, disk, 0, size), "%s/%s: every byte is zero", name, disk)
			}
		}
		if policy == m.WipeMetadata {
			eventually(t, 10*time.Second, func() bool { return len(serverEvents(t, name, m.ReasonMetadataWipeOnly)) == 1 },
				"%s: a Warning event %s", name, m.ReasonMetadataWipeOnly)
			assert.Contains(t, serverEvents(t, name, m.ReasonMetadataWipeOnly)[0], "still readable")
		}
	}
	// The metadata release's event came after its own wipe; the other two releases, wiped as
	// fully, recorded none.
	for i, name := range names {
		if policies[i] != m.WipeMetadata {
			assert.Empty(t, serverEvents(t, name, m.ReasonMetadataWipeOnly), "%s (%q)", name, policies[i])
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestFailedWipeKeepsTheServerOutOfThePool: a disk that cannot be wiped sends the server to
// Error, naming the disk; it is never Available.
func TestFailedWipeKeepsTheServerOutOfThePool(t *testing.T) {
	ctx := context.Background()
	p, name := startOneServer(t, "badwipe", 210)
	host := p.hosts[name]
	claim := claimServer(t, "badwipe", "tenant", name, nil)
	// The disk disappears while the tenant has the server: the probe cannot wipe it.
	require.NoError(t, os.Remove(filepath.Join(host.Root, "dev", host.Disks[0])))
	releaseAndWait(t, claim)

	s := waitServer(t, name, m.ServerStateError, 60*time.Second)
	assert.Equal(t, m.ReasonWipeFailed, s.Status.LastTransitionReason)
	cleaned := meta.FindStatusCondition(s.Status.Conditions, m.ConditionCleaned)
	require.NotNil(t, cleaned)
	assert.Equal(t, metav1.ConditionFalse, cleaned.Status)
	assert.Contains(t, cleaned.Message, host.Disks[0])
	// It stays out of the pool: a new claim for it waits.
	other := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "badwipe", Name: "next"}, Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: name}}}
	require.NoError(t, k8s.Create(ctx, other))
	eventually(t, 10*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(other), other))
		c := meta.FindStatusCondition(other.Status.Conditions, m.ConditionBound)
		return c != nil && c.Reason == m.ClaimReasonNoMatchingServer
	})
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, s))
	assert.Equal(t, m.ServerStateError, s.Status.State)
}

// TestClaimsImageIsInstalledAndBootsFromDisk: the claim's image is installed by the probe
// (in-process, on the host's disk file): the disk holds the image's bytes and a config drive
// with the claim's ignition; the server then boots its disk, for good, and powering it off and
// on through the claim boots the disk again.
func TestClaimsImageIsInstalledAndBootsFromDisk(t *testing.T) {
	ctx := context.Background()
	p, name := startOneServer(t, "provision", 220)
	userData := []byte("#cloud-config\nhostname: web\n\x00binary\xff")
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "provision", Name: "web-ignition"},
		Data: map[string][]byte{m.IgnitionSecretKey: userData}}))
	image, checksum := images.SimImage()
	// The install boot is held until its ignition, which the boot service serves over plain
	// HTTP and embeds in the boot's ISO, has been looked at: it has no user data, only its
	// digest, and the probe fetches the user data from the registry.
	boots.Hold(p.hosts[name].UUID)
	defer boots.Release(p.hosts[name].UUID)
	claim := claimServer(t, "provision", "web", name, func(c *m.ServerClaim) {
		c.Spec.Image, c.Spec.ImageChecksum = image, checksum
		c.Spec.IgnitionSecretRef = &m.LocalObjectReference{Name: "web-ignition"}
	})
	var rendered corev1.Secret
	eventually(t, 30*time.Second, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: name + "-provision-ignition"}, &rendered) == nil
	}, "the install boot's ignition is rendered")
	requireNoUserData(t, rendered.Data, userData)
	// A virtual-media boot's ISO carries the same ignition, gzipped in its embed area: nor
	// does that, once unpacked.
	embed, err := (&bootmedia.Template{Manifest: bootmedia.Manifest{EmbedSize: 1 << 20}}).Embed(rendered.Data[ignition.SecretKey], "http://boot.example/boot/t")
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(embed))
	require.NoError(t, err)
	zr.Multistream(false)
	unpacked, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(unpacked), `"mode": "provision"`, "the embed is the install's ignition")
	requireNoUserData(t, map[string][]byte{"the ISO's embed": unpacked}, userData)
	ign, err := ignition.Parse(rendered.Data[ignition.SecretKey])
	require.NoError(t, err)
	require.NotNil(t, ign.Install)
	assert.Equal(t, ignition.UserDataDigest(userData), ign.Install.UserDataSHA256, "the ignition names the user data by its digest")
	boots.Release(p.hosts[name].UUID)
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		return meta.IsStatusConditionTrue(claim.Status.Conditions, m.ConditionReady)
	}, "the claim is Ready once its image is installed")
	assert.True(t, meta.IsStatusConditionTrue(claim.Status.Conditions, m.ConditionProvisioned))
	assert.NotEmpty(t, claim.Status.InstallProgress, "the claim shows what was written")
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	last := s.Status.LastInstall
	require.NotNil(t, last)
	require.True(t, last.Succeeded, "%+v", last)
	assert.Equal(t, checksum, last.ServedDigest)
	assert.EqualValues(t, lab.SimImageBytes, last.Bytes)

	// The disk's bytes: the image, then the config drive with the ignition, byte for byte.
	disk := wipe.DevicePath(p.hosts[name].Root, last.Disk)
	data, err := os.ReadFile(disk)
	require.NoError(t, err)
	want := lab.SimImage()
	// The config drive's partition entry is the one difference: the MBR's second entry.
	assert.Equal(t, want[:462], data[:462], "the image's boot code and first partition are on %s", last.Disk)
	assert.Equal(t, want[512:], data[512:lab.SimImageBytes], "the image's sectors are on %s", last.Disk)
	assert.NotEqual(t, want[462:478], data[462:478], "a second partition, the config drive, is in the MBR")
	files, err := configdrive.Read(disk)
	require.NoError(t, err)
	assert.Equal(t, userData, files.UserData)
	assert.Equal(t, string(claim.UID), files.InstanceID)
	assert.Equal(t, s.Name, files.Server, "meta.server is the Server's name (a CAPI node's providerID ironfleet://<server>)")

	id := systemID(t, &s)
	eventually(t, 10*time.Second, func() bool {
		target, enabled := p.sim.BootOverride(id)
		return p.sim.PowerState(id) == "On" && target == bmcsim.BootHdd && enabled == "Continuous"
	}, "installed: on, booting its disk for good")
	eventually(t, 10*time.Second, func() bool { return servedImage(name, image) }, "the install boot was served")
	installBoots := len(p.sim.BootLog(id))
	for _, power := range []m.Power{m.PowerOff, m.PowerOn} {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		before := claim.DeepCopy()
		claim.Spec.Power = power
		require.NoError(t, k8s.Patch(ctx, claim, client.MergeFrom(before)))
		eventually(t, 20*time.Second, func() bool { return p.sim.PowerState(id) == string(power) }, "power %s through the claim", power)
	}
	log := p.sim.BootLog(id)
	require.Len(t, log, installBoots+1, "one more boot")
	assert.Equal(t, bmcsim.BootHdd, log[len(log)-1].Boot, "the installed server boots from disk, not the network")
}

// requireNoUserData fails when any value of a Secret served over plain HTTP holds the user data,
// as it is or in base64 (how JSON carries bytes).
func requireNoUserData(t *testing.T, data map[string][]byte, userData []byte) {
	t.Helper()
	require.NotEmpty(t, data)
	for key, value := range data {
		for _, form := range [][]byte{userData, []byte(base64.StdEncoding.EncodeToString(userData)), []byte(base64.RawStdEncoding.EncodeToString(userData))} {
			require.False(t, bytes.Contains(value, form), "%s carries the claim's user data", key)
		}
	}
}

// TestInstalledServerBootsFromDiskBehindABootOnceOnlyBMC: a BMC that offers no Continuous
// boot override (Supermicro's) still gets its claim's image installed and booted from disk,
// with a one-time override, and the claim says that a power-on outside Ironfleet follows the
// firmware's boot order; every power-on through the claim sets the disk again first, even
// after someone pointed the next boot at the network.
func TestInstalledServerBootsFromDiskBehindABootOnceOnlyBMC(t *testing.T) {
	ctx := context.Background()
	p, name := startOneServerWith(t, "bootonce", 280, bmcsim.Options{Quirks: &bmcsim.Quirks{BootOnceOnly: true}})
	claim := claimServer(t, "bootonce", "web", name, func(c *m.ServerClaim) {
		c.Spec.Image, c.Spec.ImageChecksum = images.SimImage()
	})
	eventually(t, 60*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		return meta.IsStatusConditionTrue(claim.Status.Conditions, m.ConditionProvisioned)
	}, "the claim's image is installed behind a BMC without Continuous boot overrides")
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	require.NotNil(t, s.Status.LastInstall)
	require.True(t, s.Status.LastInstall.Succeeded, "%+v", s.Status.LastInstall)
	id := systemID(t, &s)
	eventually(t, 20*time.Second, func() bool {
		log := p.sim.BootLog(id)
		return p.sim.PowerState(id) == "On" && len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootHdd
	}, "installed: on, booted from its disk")
	eventually(t, 10*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		c := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionProvisioned)
		return c != nil && strings.Contains(c.Message, "only one-time boot overrides")
	}, "the claim says the disk boot holds for Ironfleet's power-ons only")
	target, enabled := p.sim.BootOverride(id)
	assert.NotEqual(t, "Continuous", enabled, "the BMC has no Continuous override (%s %s)", target, enabled)

	// Off, then someone points the next boot at the network (as a firmware boot order may):
	// the claim's power-on boots the disk all the same.
	installBoots := len(p.sim.BootLog(id))
	setClaimPower(t, claim, m.PowerOff)
	eventually(t, 20*time.Second, func() bool { return p.sim.PowerState(id) == "Off" }, "power Off through the claim")
	patchBootOverride(t, p.sim, s.Spec.SystemURI, id, bmcsim.BootPxe, "Once")
	setClaimPower(t, claim, m.PowerOn)
	eventually(t, 20*time.Second, func() bool { return p.sim.PowerState(id) == "On" }, "power On through the claim")
	log := p.sim.BootLog(id)
	require.Len(t, log, installBoots+1, "one more boot")
	assert.Equal(t, bmcsim.BootHdd, log[len(log)-1].Boot, "the installed server boots from disk, not the network")
}

// setClaimPower patches a claim's spec.power.
func setClaimPower(t *testing.T, claim *m.ServerClaim, power m.Power) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	before := claim.DeepCopy()
	claim.Spec.Power = power
	require.NoError(t, k8s.Patch(ctx, claim, client.MergeFrom(before)))
}

// patchBootOverride sets a system's boot override on the simulated BMC from outside Ironfleet
// (Basic auth, as anyone with the BMC's credentials).
func patchBootOverride(t *testing.T, sim *bmcsim.BMC, systemURI, id string, target bmcsim.BootTarget, enabled string) {
	t.Helper()
	body := fmt.Sprintf(`{"Boot":{"BootSourceOverrideTarget":%q,"BootSourceOverrideEnabled":%q}}`, target, enabled)
	req, err := http.NewRequest(http.MethodPatch, sim.URL()+systemURI, strings.NewReader(body))
	require.NoError(t, err)
	req.SetBasicAuth(goodUser, goodPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "PATCH %s: %s", systemURI, resp.Status)
	got, on := sim.BootOverride(id)
	require.Equal(t, target, got)
	require.Equal(t, enabled, on)
}

// TestPowerOnOfAServerThatIsOnIsDone: a BMC that refuses a power-on for a system that is on
// (iDRAC answers 409) has done what the claim asks: the request is marked sent, once, with no
// failed BMC action and nothing booted again.
func TestPowerOnOfAServerThatIsOnIsDone(t *testing.T) {
	ctx := context.Background()
	p, name := startOneServerWith(t, "already-on", 290, bmcsim.Options{Quirks: &bmcsim.Quirks{ResetConflictInState: true}})
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	id := systemID(t, &s)
	delivery(t, name, m.PowerOff, m.PowerConfirmed, 30*time.Second) // the power-off that ended discovery is done
	p.sim.SetPowerState(id, "On")                                   // someone powered it on at the BMC
	boots := len(p.sim.BootLog(id))
	claimServer(t, "already-on", "web", name, func(c *m.ServerClaim) { c.Spec.Power = m.PowerOn })
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
		c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionPowered)
		return c != nil && (c.Reason == m.ReasonPowerOnSent || c.Reason == "PowerOnConfirmed")
	}, "the power-on the BMC refused as already done counts as sent")
	assert.Equal(t, "On", p.sim.PowerState(id))
	assert.Len(t, p.sim.BootLog(id), boots, "nothing booted again")
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(ctx, &evs))
	for _, ev := range evs.Items {
		if ev.Regarding.Name == name {
			assert.NotContains(t, ev.Note, "BMC action failed", "no failed BMC action: %s", ev.Note)
		}
	}
}

// TestAnEarlierInstallIsNotTakenForTheNewClaims: a server whose last install (an earlier
// tenant's, of the same image) was reported in the same second as its last probe boot (the
// wipe after that tenant) installs the new claim's image with a boot of its own, rather than
// taking the earlier install for it (chaos found a claim Ready on a wiped disk).
func TestAnEarlierInstallIsNotTakenForTheNewClaims(t *testing.T) {
	ctx := context.Background()
	_, name := startOneServer(t, "earlier-install", 295)
	image, checksum := images.SimImage()
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	before := s.DeepCopy()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	s.Status.LastProbeBootTime = &now
	s.Status.LastInstall = &m.InstallReport{ReportedAt: &now, Image: image, ImageChecksum: checksum, Succeeded: true,
		Reason: m.InstallReasonInstalled, Disk: "vda", Bytes: lab.SimImageBytes}
	require.NoError(t, k8s.Status().Patch(ctx, &s, client.MergeFrom(before)))
	claim := claimServer(t, "earlier-install", "web", name, func(c *m.ServerClaim) { c.Spec.Image, c.Spec.ImageChecksum = image, checksum })
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		return meta.IsStatusConditionTrue(claim.Status.Conditions, m.ConditionProvisioned)
	}, "the claim's image is installed")
	// The lab's boot service records a boot once its probe has run, which may be after the
	// claim shows the install.
	eventually(t, 10*time.Second, func() bool { return servedImage(name, image) }, "with an install boot of its own")
}

// TestFailedInstallsEndWithAReason: a wrong checksum, a missing image and hints that match no
// disk each end, after the attempts allowed, with the claim saying why; the disk of a failed
// write is wiped again, and nothing is left on it.
func TestFailedInstallsEndWithAReason(t *testing.T) {
	ctx := context.Background()
	image, checksum := images.SimImage()
	wrong := "sha256:" + strings.Repeat("0", 64)
	for i, tc := range []struct {
		name, reason, message string
		mutate                func(*m.ServerClaim)
	}{
		{"checksum", m.InstallReasonChecksumMismatch, checksum[:20], func(c *m.ServerClaim) { c.Spec.Image, c.Spec.ImageChecksum = image, wrong }},
		{"missing", m.InstallReasonImageUnreachable, "404", func(c *m.ServerClaim) { c.Spec.Image, c.Spec.ImageChecksum = images.URL("no-such.raw.gz"), checksum }},
		{"hints", m.InstallReasonNoMatchingDisk, "no-such-serial", func(c *m.ServerClaim) {
			c.Spec.Image, c.Spec.ImageChecksum = image, checksum
			c.Spec.RootDeviceHints = &m.RootDeviceHints{SerialNumber: "no-such-serial"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "install-" + tc.name
			p, name := startOneServer(t, ns, 260+i)
			claim := claimServer(t, ns, "web", name, tc.mutate)
			var c m.ServerClaim
			eventually(t, 60*time.Second, func() bool {
				require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), &c))
				cond := meta.FindStatusCondition(c.Status.Conditions, m.ConditionProvisioned)
				return cond != nil && cond.Reason == m.ReasonInstallFailed
			}, "the install fails for good")
			cond := meta.FindStatusCondition(c.Status.Conditions, m.ConditionProvisioned)
			assert.Contains(t, cond.Message, tc.reason)
			assert.Contains(t, cond.Message, tc.message)
			var s m.Server
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
			assert.EqualValues(t, operatorDeps.Discovery.Attempts, s.Status.ProvisionAttempts, "retried as often as allowed")
			assert.Equal(t, m.ServerStateReserved, s.Status.State, "the server stays the claim's")
			for _, d := range p.hosts[name].Disks {
				data, err := os.ReadFile(wipe.DevicePath(p.hosts[name].Root, d))
				require.NoError(t, err)
				assert.NotContains(t, string(data), "ironfleet lab image sector", "nothing of the image is left on %s", d)
			}
		})
	}
}

// TestMaintenanceMidInstallEndsTheInstallBoot: a server taken into maintenance while its
// claim's image is being installed loses its install boot (configuration and ignition), so
// nothing of it outlives the claim; back with its claim it installs afresh; released, no
// install boot is left.
func TestMaintenanceMidInstallEndsTheInstallBoot(t *testing.T) {
	ctx := context.Background()
	_, name := startOneServer(t, "midinstall", 270)
	image, checksum := images.SimImage()
	// The image's server holds the first download until the test lets it go.
	hold, held := make(chan struct{}), make(chan struct{}, 8)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(hold) }) })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		<-hold
		resp, err := http.Get(image)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(slow.Close)
	claim := claimServer(t, "midinstall", "web", name, func(c *m.ServerClaim) {
		c.Spec.Image, c.Spec.ImageChecksum = slow.URL+"/"+lab.SimImageName, checksum
	})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the install never asked for the image")
	}
	boot := client.ObjectKey{Namespace: operatorDeps.Probe.Namespace, Name: name + "-provision"}
	require.NoError(t, k8s.Get(ctx, boot, &m.ServerBootConfiguration{}), "the install boot exists while it runs")

	sm := &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "midinstall", Name: "fw"},
		Spec: m.ServerMaintenanceSpec{ServerRef: m.LocalObjectReference{Name: name}, Reason: "firmware", Policy: m.MaintenanceEnforced}}
	require.NoError(t, k8s.Create(ctx, sm))
	s := waitServer(t, name, m.ServerStateMaintenance, 20*time.Second)
	assert.EqualValues(t, 0, s.Status.ProvisionAttempts, "the install starts afresh after the maintenance")
	cond := meta.FindStatusCondition(s.Status.Conditions, m.ConditionProvisioned)
	require.NotNil(t, cond)
	assert.Equal(t, m.ReasonInstallInterrupted, cond.Reason)
	assert.Empty(t, s.Status.ProbeBoot, "the registry takes no report of the stopped install")
	for _, obj := range []client.Object{&m.ServerBootConfiguration{}, &corev1.Secret{}} {
		key := boot
		if _, ok := obj.(*corev1.Secret); ok {
			key.Name += "-ignition"
		}
		err := k8s.Get(ctx, key, obj)
		assert.True(t, apierrors.IsNotFound(err), "%s is gone with the install: %v", key.Name, err)
	}
	once.Do(func() { close(hold) })

	require.NoError(t, k8s.Delete(ctx, sm))
	eventually(t, 60*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		return meta.IsStatusConditionTrue(claim.Status.Conditions, m.ConditionProvisioned)
	}, "back with its claim, the server installs the image")
	releaseAndWait(t, claim)
	waitServer(t, name, m.ServerStateAvailable, 60*time.Second)
	err := k8s.Get(ctx, boot, &m.ServerBootConfiguration{})
	assert.True(t, apierrors.IsNotFound(err), "no install boot outlives the claim: %v", err)
}

// TestMaintenanceWaitsForOwnerApproval: OwnerApproval waits for the claim's owner, then takes
// the server (power per the maintenance); ending it returns the server to its claim.
func TestMaintenanceWaitsForOwnerApproval(t *testing.T) {
	ctx := context.Background()
	p, name := startOneServer(t, "maint", 230)
	claim := claimServer(t, "maint", "db", name, nil)
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	id := systemID(t, &s)

	sm := &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "maint", Name: "dimm"},
		Spec: m.ServerMaintenanceSpec{ServerRef: m.LocalObjectReference{Name: name}, Reason: "replace DIMM", Policy: m.MaintenanceOwnerApproval, Power: m.PowerOff}}
	require.NoError(t, k8s.Create(ctx, sm))
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sm), sm))
		c := meta.FindStatusCondition(sm.Status.Conditions, m.ConditionReady)
		return c != nil && c.Reason == m.ReasonWaitingForApproval
	}, "the maintenance waits for the owner")
	assert.Equal(t, m.MaintenanceStatePending, sm.Status.State)
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	assert.Equal(t, m.ServerStateReserved, s.Status.State, "the claimed server is not taken without approval")
	// The owner cannot read the maintenance: the claim, in the owner's namespace, is told, once.
	var asked []eventsv1.Event
	eventually(t, 10*time.Second, func() bool {
		var evs eventsv1.EventList
		require.NoError(t, k8s.List(ctx, &evs, client.InNamespace("maint")))
		asked = asked[:0]
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ServerClaim" && e.Regarding.Name == "db" && e.Reason == m.ReasonMaintenanceRequested {
				asked = append(asked, e)
			}
		}
		return len(asked) > 0
	}, "the claim's owner is asked")
	require.Len(t, asked, 1, "asked once")
	assert.Contains(t, asked[0].Note, "replace DIMM")
	assert.Contains(t, asked[0].Note, m.AnnotationApproveMaintenance+"=true")

	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	before := claim.DeepCopy()
	claim.Annotations = map[string]string{m.AnnotationApproveMaintenance: "true"}
	require.NoError(t, k8s.Patch(ctx, claim, client.MergeFrom(before)))

	waitServer(t, name, m.ServerStateMaintenance, 20*time.Second)
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sm), sm))
		return sm.Status.State == m.MaintenanceStateInMaintenance
	})
	eventually(t, 10*time.Second, func() bool { return p.sim.PowerState(id) == "Off" }, "power follows the maintenance")
	eventually(t, 10*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		c := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionReady)
		return c != nil && c.Reason == m.ReasonWaitingForServer && strings.Contains(c.Message, "in maintenance (ServerMaintenance maint/dimm)")
	}, "the claim says its server is in maintenance, and which")

	require.NoError(t, k8s.Delete(ctx, sm))
	s = *waitServer(t, name, m.ServerStateReserved, 20*time.Second)
	require.NotNil(t, s.Spec.ServerClaimRef)
	assert.Equal(t, "db", s.Spec.ServerClaimRef.Name, "back to its claim")
	eventually(t, 10*time.Second, func() bool { return p.sim.PowerState(id) == "On" }, "the claim's power again")
}

// TestBootConfigurationOfAGoneClaimIsDeleted: a boot configuration whose claim is gone (a create
// sent by a killed manager can land after its successor released the claim) is deleted, and so
// is one that an earlier claim of the same name made; neither may be served to a server again.
func TestBootConfigurationOfAGoneClaimIsDeleted(t *testing.T) {
	ctx := context.Background()
	ns := "orphan-boots"
	createNamespace(t, ns)
	claimed := func(name string, uid types.UID) *m.ServerBootConfiguration {
		sbc := &m.ServerBootConfiguration{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: m.GroupVersion.String(), Kind: "ServerClaim", Name: name, UID: uid, Controller: ptr.To(true)}}},
			Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "a-released-server"},
				Image: "ghcr.io/example/old-tenant:1", Purpose: m.BootPurposeProvisioning},
		}
		require.NoError(t, k8s.Create(ctx, sbc))
		return sbc
	}
	gone := claimed("gone", "6f0c1f9e-0000-4000-8000-000000000001")

	// A claim named "again" is there now (waiting: no server matches it); the configuration
	// is an earlier one's.
	again := poolClaim(ns, "again", "no-such-pool")
	again.Spec.Image, again.Spec.ImageChecksum = images.SimImage()
	require.NoError(t, k8s.Create(ctx, again))
	earlier := claimed("again", "6f0c1f9e-0000-4000-8000-000000000002")

	for _, sbc := range []*m.ServerBootConfiguration{gone, earlier} {
		eventually(t, 30*time.Second, func() bool {
			var now m.ServerBootConfiguration
			err := k8s.Get(ctx, client.ObjectKeyFromObject(sbc), &now)
			return apierrors.IsNotFound(err) || (err == nil && now.UID != sbc.UID)
		}, "boot configuration %s of a claim that is gone deleted", sbc.Name)
	}
	var waiting m.ServerClaim
	eventually(t, 10*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(again), &waiting))
		return waiting.Status.Phase != ""
	}, "the claim of that name gets its phase")
	assert.Equal(t, m.ClaimPhasePending, waiting.Status.Phase, "the claim of that name is untouched")
}

// TestBootConfigurationForAnotherServerIsReplaced: a claim's boot configuration for a server it
// does not hold (a create that landed after the claim lost that server) is deleted, whether the
// claim is waiting or bound, and the claim's image is booted only on the server it holds.
func TestBootConfigurationForAnotherServerIsReplaced(t *testing.T) {
	ctx := context.Background()
	_, name := startOneServer(t, "boot-elsewhere", 240)
	// The claim waits for a server that does not exist, so nothing binds it yet.
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "boot-elsewhere", Name: "web"},
		Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: "a-server-it-lost"}}}
	claim.Spec.Image, claim.Spec.ImageChecksum = images.SimImage()
	require.NoError(t, k8s.Create(ctx, claim))
	key := client.ObjectKeyFromObject(claim)
	stale := func() *m.ServerBootConfiguration {
		sbc := &m.ServerBootConfiguration{
			ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, Labels: map[string]string{m.LabelServer: "a-server-it-lost"}},
			Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "a-server-it-lost"},
				Image: claim.Spec.Image, Purpose: m.BootPurposeProvisioning},
		}
		require.NoError(t, controllerutil.SetControllerReference(claim, sbc, k8s.Scheme()))
		return sbc
	}
	replaced := func(old *m.ServerBootConfiguration) func() bool {
		return func() bool {
			var sbc m.ServerBootConfiguration
			err := k8s.Get(ctx, key, &sbc)
			return apierrors.IsNotFound(err) || (err == nil && sbc.UID != old.UID && sbc.Spec.ServerRef.Name == name)
		}
	}
	waiting := stale()
	require.NoError(t, k8s.Create(ctx, waiting))
	eventually(t, 30*time.Second, replaced(waiting), "the waiting claim's configuration for another server deleted")

	before := claim.DeepCopy()
	claim.Spec.ServerRef = &m.LocalObjectReference{Name: name}
	require.NoError(t, k8s.Patch(ctx, claim, client.MergeFrom(before)))
	eventually(t, 30*time.Second, func() bool {
		var now m.ServerClaim
		return k8s.Get(ctx, key, &now) == nil && meta.IsStatusConditionTrue(now.Status.Conditions, m.ConditionReady)
	}, "the claim is Ready once its image is installed")
	eventually(t, 10*time.Second, func() bool { return servedImage(name, claim.Spec.Image) },
		"the claim's image was installed on the server it holds")

	// Bound: a configuration of the claim's for another server appears (a create that landed
	// late); the claim's image is installed by the probe, so the claim has no configuration of
	// its own, and this one is deleted.
	bound := stale()
	require.NoError(t, k8s.Create(ctx, bound))
	eventually(t, 30*time.Second, replaced(bound), "the bound claim's stray configuration deleted")
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	assert.Nil(t, s.Spec.BootConfigurationRef, "the server names no claim configuration")
}

// TestPowerOffClaimLeavesItsServerOff: a claim that wants its server off gets its image
// installed and the server off — even one powered on meanwhile from outside — booting its disk
// at the first power-on.
func TestPowerOffClaimLeavesItsServerOff(t *testing.T) {
	ctx := context.Background()
	p, name := startOneServer(t, "claim-off", 250)
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
	id := systemID(t, &s)
	p.sim.SetPowerState(id, "On") // someone at the rack

	claim := claimServer(t, "claim-off", "cold", name, func(c *m.ServerClaim) {
		c.Spec.Power = m.PowerOff
		c.Spec.Image, c.Spec.ImageChecksum = images.SimImage()
	})
	eventually(t, 30*time.Second, func() bool {
		var now m.ServerClaim
		return k8s.Get(ctx, client.ObjectKeyFromObject(claim), &now) == nil && meta.IsStatusConditionTrue(now.Status.Conditions, m.ConditionReady)
	}, "the claim is Ready")
	eventually(t, 30*time.Second, func() bool {
		target, enabled := p.sim.BootOverride(id)
		return p.sim.PowerState(id) == "Off" && target == bmcsim.BootHdd && enabled == "Continuous"
	}, "the server is off, its next boot its disk")
}

// TestAClaimWithAnInvalidSelectorSaysSo: a selector the schema lets through but that is not a
// label selector (a key no label can have) is shown on the claim's Bound condition, not only in
// the manager's log.
func TestAClaimWithAnInvalidSelectorSaysSo(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "bad-selector")
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "bad-selector", Name: "web"},
		Spec: m.ServerClaimSpec{ServerSelector: &m.ServerSelector{MatchExpressions: []m.ServerSelectorRequirement{{Key: "not a label key!", Operator: metav1.LabelSelectorOpExists}}}}}
	require.NoError(t, k8s.Create(ctx, claim))
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		c := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionBound)
		return c != nil && c.Reason == m.ClaimReasonInvalidServerSelector
	}, "the claim says its selector is invalid")
	c := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionBound)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "not a label key!")
	assert.Equal(t, m.ClaimPhasePending, claim.Status.Phase)
	require.NoError(t, k8s.Delete(ctx, claim))
}

// TestAnInstallBootTheServerDoesNotNameEndsWithTheClaim: an install boot's ignition Secret is
// written first, then its configuration, then the status write that names the boot. A manager
// killed after either write leaves a Server that names no boot and has booted none, and a
// configuration and its Secret, or the Secret alone; the claim released then, what is left of
// the install boot must still go with it (the chaos run found each left over: the
// configuration on a pooled server, the Secret alone on a reserved one).
func TestAnInstallBootTheServerDoesNotNameEndsWithTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name        string
		system      int
		secretAlone bool // killed between the Secret's write and the configuration's
	}{
		{"unnamed-install", 297, false},
		{"unmade-install", 298, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			_, name := startOneServer(t, tc.name, tc.system)
			boots.Hold(name) // the install's probe boots, and does not report
			t.Cleanup(func() { boots.Release(name) })
			claim := claimServer(t, tc.name, "web", name, func(c *m.ServerClaim) { c.Spec.Image, c.Spec.ImageChecksum = images.SimImage() })
			boot := client.ObjectKey{Namespace: operatorDeps.Probe.Namespace, Name: name + "-provision"}
			ignitionKey := client.ObjectKey{Namespace: boot.Namespace, Name: boot.Name + "-ignition"}
			eventually(t, 30*time.Second, func() bool { return k8s.Get(ctx, boot, &m.ServerBootConfiguration{}) == nil }, "the install boot is made")

			// As a manager killed before it named the boot would leave it: nothing named,
			// nothing booted.
			require.NoError(t, stopOperator())
			var s m.Server
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
			s.Status.ProbeBoot, s.Status.ProvisionAttempts, s.Status.LastProbeBootTime = "", 0, nil
			require.NoError(t, k8s.Status().Update(ctx, &s))
			if tc.secretAlone {
				require.NoError(t, k8s.Delete(ctx, &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: boot.Namespace, Name: boot.Name}}))
				require.NoError(t, k8s.Get(ctx, ignitionKey, &corev1.Secret{}), "the install's ignition Secret is there")
			}
			// The claim released, as the claim controller releases it, before the Server's
			// reconciler can look again (a restarted manager may run them in either order).
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
			s.Spec.ServerClaimRef, s.Spec.BootConfigurationRef, s.Spec.Power = nil, nil, ""
			require.NoError(t, k8s.Update(ctx, &s))
			require.NoError(t, k8s.Delete(ctx, claim))
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
			claim.Finalizers = nil
			require.NoError(t, k8s.Update(ctx, claim))
			require.NoError(t, startOperator())

			eventually(t, 30*time.Second, func() bool { return k8s.Get(ctx, client.ObjectKeyFromObject(claim), &m.ServerClaim{}) != nil }, "the claim goes")
			eventually(t, 30*time.Second, func() bool {
				err := k8s.Get(ctx, boot, &m.ServerBootConfiguration{})
				return apierrors.IsNotFound(err)
			}, "the install boot goes with the claim")
			// The Secret is deleted after its configuration, by the same cleanup: wait for it too.
			eventually(t, 30*time.Second, func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, ignitionKey, &corev1.Secret{}))
			}, "and its ignition Secret")
			boots.Release(name)
			waitServer(t, name, m.ServerStateAvailable, 90*time.Second)
			// Nothing brings the Secret back on the way to the pool.
			require.True(t, apierrors.IsNotFound(k8s.Get(ctx, ignitionKey, &corev1.Secret{})), "the install's ignition Secret stays gone")
		})
	}
}

// TestTaintsKeepClaimsOffUnlessTolerated: a fleet owner's NoClaim taint keeps a claim that does
// not tolerate it pending, saying so; a claim tolerating it binds the tainted server; and the
// pending claim binds the other server as soon as its taint is removed.
func TestTaintsKeepClaimsOffUnlessTolerated(t *testing.T) {
	ctx := context.Background()
	p := startPoolWith(t, "taints", 880, []string{"small-vm", "small-vm"}, bmcsim.Options{})
	createNamespace(t, "taints")
	var servers []string
	for name := range p.hosts {
		servers = append(servers, name)
	}
	retire := m.Taint{Key: "example.com/retire", Value: "rack-7", Effect: m.TaintNoClaim}
	setTaints := func(server string, taints []m.Taint) {
		t.Helper()
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var s m.Server
			if err := k8s.Get(ctx, client.ObjectKey{Name: server}, &s); err != nil {
				return err
			}
			s.Spec.Taints = taints
			return k8s.Update(ctx, &s)
		}))
	}
	for _, s := range servers {
		setTaints(s, []m.Taint{retire})
	}
	selector := &m.ServerSelector{MatchLabels: map[string]m.LabelValue{m.LabelBMC: "taints"}}
	plain := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "taints", Name: "plain"}, Spec: m.ServerClaimSpec{ServerSelector: selector}}
	require.NoError(t, k8s.Create(ctx, plain))
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(plain), plain))
		c := meta.FindStatusCondition(plain.Status.Conditions, m.ConditionBound)
		return c != nil && c.Reason == m.ClaimReasonNoMatchingServer &&
			strings.Contains(c.Message, "is free of NoClaim taints the claim does not tolerate (spec.tolerations)")
	}, "the claim that tolerates nothing waits, saying why")

	tolerant := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "taints", Name: "tolerant"}, Spec: m.ServerClaimSpec{
		ServerSelector: selector, Tolerations: []m.Toleration{{Key: "example.com/retire", Operator: m.TolerationExists}}}}
	require.NoError(t, k8s.Create(ctx, tolerant))
	var taken string
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(tolerant), tolerant))
		if tolerant.Status.ServerRef == nil {
			return false
		}
		taken = tolerant.Status.ServerRef.Name
		return true
	}, "the claim tolerating the taint binds a tainted server")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(plain), plain))
	assert.Nil(t, plain.Status.ServerRef, "the other claim still waits")

	other := servers[0]
	if other == taken {
		other = servers[1]
	}
	setTaints(other, nil)
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(plain), plain))
		return plain.Status.ServerRef != nil && plain.Status.ServerRef.Name == other
	}, "the waiting claim binds the server whose taint was removed")
}
