package vm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NamespacePrefix starts the name of every network namespace this package creates; the
// creating process's pid follows, so CleanupStale can tell a dead run's namespaces.
const NamespacePrefix = "ironfleet-net-"

// BridgeName is the bridge inside every Network's namespace. Names inside a namespace never
// meet the host's, so every Network uses the same ones.
const BridgeName = "br0"

// NetworkOptions configures a Network.
type NetworkOptions struct {
	// Subnet is the bridge's IPv4 subnet; the bridge takes its first address. Zero: a /24
	// from 10.213.0.0/16, a different one for each Network of this process, so logs of
	// several networks are not ambiguous (namespaces isolate them either way).
	Subnet netip.Prefix
	// IPv6 keeps IPv6 on the taps too, and on the bridge even with NoRouterAdvertisements.
	// Off by default: nothing here routes IPv6, and an IPv6-quiet host side sends no router
	// solicitations or neighbour discovery to the VMs. Turning it on does not speed iPXE up (measured with
	// a DHCP server answering: "Configuring ... ok" 18.3-19.5 s after start with IPv6 off,
	// 18.4-19.8 s with it on); router advertisements do.
	IPv6 bool
	// NoRouterAdvertisements turns off the router advertisement responder (ra.go). By
	// default the bridge has a link-local IPv6 address (only that; the taps keep IPv6 off,
	// which bridging does not need) and answers every router solicitation with an
	// advertisement that configures nothing, so iPXE ends its IPv6 autoconfiguration at
	// once instead of waiting for advertisements that never come. Measured (BIOS VM,
	// iPXE NIC ROM, DHCPv4 answered at once, TCG on 2 cores): "Configuring (net0 ...) ok"
	// 2.2-2.5 s after QEMU start with advertisements, 18.7-22.4 s without
	// (TestIPXEConfiguresAtOnceWithRouterAdvertisements, IRONFLEET_VM_RA_BASELINE=1).
	NoRouterAdvertisements bool
}

// Network is a private Ethernet segment for VMs: a named network namespace with its loopback
// up, a bridge with an IPv4 address (and a link-local IPv6 one to answer router
// solicitations from), and one persistent tap per VM NIC on the bridge. It has
// no uplink and no veth to the host, so every packet stays inside; the host process serves
// the VMs with sockets opened inside the namespace (Do, ListenTCP, ListenUDP) and reaches the
// host's loopback through Forward.
type Network struct {
	name   string
	handle netns.NsHandle
	subnet netip.Prefix
	bridge netip.Addr
	ipv6   bool
	raOn   bool
	ra     *raResponder // nil with NoRouterAdvertisements

	mu        sync.Mutex
	taps      map[string]bool
	nextTap   int
	forwards  map[*Forwarder]bool
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

var (
	networkSeq   atomic.Int64
	cleanupOnce  sync.Once
	defaultSpace = netip.MustParsePrefix("10.213.0.0/16")
)

// NewNetwork creates a namespace, its bridge and address. The first call of the process also
// removes what dead runs left behind (CleanupStale), so a killed test does not leak into the
// next.
func NewNetwork(opts NetworkOptions) (*Network, error) {
	cleanupOnce.Do(func() { _ = CleanupStale() })
	seq := networkSeq.Add(1)
	subnet := opts.Subnet
	if !subnet.IsValid() {
		base := defaultSpace.Addr().As4()
		base[2] = byte(seq % 256)
		subnet = netip.PrefixFrom(netip.AddrFrom4(base), 24)
	}
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return nil, fmt.Errorf("subnet %s must be IPv4 with room for hosts", subnet)
	}
	n := &Network{
		name:     fmt.Sprintf("%s%d-%d", NamespacePrefix, os.Getpid(), seq),
		subnet:   subnet,
		bridge:   subnet.Addr().Next(),
		ipv6:     opts.IPv6,
		raOn:     !opts.NoRouterAdvertisements,
		taps:     map[string]bool{},
		forwards: map[*Forwarder]bool{},
	}
	handle, err := createNamedNamespace(n.name)
	if err != nil {
		return nil, fmt.Errorf("create network namespace %s: %w", n.name, err)
	}
	n.handle = handle
	if err := n.Do(n.setUp); err != nil {
		return nil, errors.Join(fmt.Errorf("set up network namespace %s: %w", n.name, err), n.Close())
	}
	if !opts.NoRouterAdvertisements {
		if n.ra, err = n.startRouterAdvertisements(); err != nil {
			return nil, errors.Join(err, n.Close())
		}
	}
	return n, nil
}

// createNamedNamespace creates a namespace bound at /run/netns/<name> (where `ip netns`
// finds it). netns.NewNamed moves the calling thread into the new namespace, so it runs on a
// locked thread that moves back, or is thrown away if it cannot.
func createNamedNamespace(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	if err := prepareNetnsDir(); err != nil {
		return netns.None(), err
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("read the current namespace: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if restoreErr := netns.Set(orig); restoreErr != nil {
			// The thread stays locked: Go ends it with this goroutine instead of reusing it.
			done <- result{h: h, err: errors.Join(err, fmt.Errorf("return to the original namespace: %w", restoreErr))}
			return
		}
		runtime.UnlockOSThread()
		done <- result{h: h, err: err}
	}()
	r := <-done
	if r.err != nil && r.h.IsOpen() {
		_ = r.h.Close()
		_ = deleteNamedNamespace(name)
	}
	return r.h, r.err
}

// setUp runs inside the namespace: loopback, the bridge, its address and its IPv6 settings.
func (n *Network) setUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s: %w", BridgeName, err)
	}
	// Before the bridge is up, so it never has an address it did not ask for.
	switch {
	case n.raOn:
		if err := setIPv6Sysctls(BridgeName, bridgeIPv6Settings); err != nil {
			return err
		}
	case !n.ipv6:
		if err := disableIPv6(BridgeName); err != nil {
			return err
		}
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: n.bridge.AsSlice(), Mask: net.CIDRMask(n.subnet.Bits(), 32)}}
	if err := netlink.AddrAdd(br, addr); err != nil {
		return fmt.Errorf("address bridge %s with %s: %w", BridgeName, addr, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring bridge %s up: %w", BridgeName, err)
	}
	return nil
}

// disableIPv6 writes the interface's sysctl. /proc/sys/net shows the namespace of the
// thread that opens it, so this must run inside Do.
func disableIPv6(ifname string) error {
	path := "/proc/sys/net/ipv6/conf/" + ifname + "/disable_ipv6"
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("disable IPv6 on %s: %w", ifname, err)
	}
	return nil
}

// Name is the namespace's name, as `ip netns` lists it.
func (n *Network) Name() string { return n.name }

// BridgeIP is the bridge's address: where servers for the VMs (DHCP, TFTP, HTTP) listen.
func (n *Network) BridgeIP() netip.Addr { return n.bridge }

// Subnet is the bridge's IPv4 subnet, from which a DHCP server hands out addresses.
func (n *Network) Subnet() netip.Prefix { return n.subnet }

// Close ends forwarders, kills QEMUs still using its taps (their VMs see an exit by itself)
// and every process inside the namespace, and deletes it, which removes the bridge and taps
// with it. It is idempotent. Sockets others opened inside (Do, ListenTCP) are theirs to
// close; they keep working on a namespace no longer named.
func (n *Network) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		forwards := n.forwards
		n.forwards = map[*Forwarder]bool{}
		n.mu.Unlock()
		var errs []error
		if n.ra != nil {
			errs = append(errs, n.ra.close())
		}
		for f := range forwards {
			errs = append(errs, f.Close())
		}
		errs = append(errs, killQEMUsOf(n.name)) // QEMUs whose VMs were not closed first
		if n.handle.IsOpen() {
			errs = append(errs, killProcessesIn(n.handle))
			errs = append(errs, n.handle.Close())
		}
		errs = append(errs, deleteNamedNamespace(n.name))
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// prepareNetnsDir makes /run/netns a shared mount of itself, as `ip netns add` does before
// its first namespace. Without this, a later `ip netns add` (a person debugging, another
// tool) bind-mounts /run/netns over itself and strands the namespaces mounted before under
// it: they can be neither unmounted nor removed by name any more.
func prepareNetnsDir() error {
	netnsDirOnce.Do(func() {
		if err := os.MkdirAll(netnsDir, 0o755); err != nil {
			netnsDirErr = fmt.Errorf("create %s: %w", netnsDir, err)
			return
		}
		shared := func() error { return unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "") }
		err := shared()
		if errors.Is(err, unix.EINVAL) { // not a mount point yet
			if err = unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
				err = shared()
			}
		}
		if err != nil {
			netnsDirErr = fmt.Errorf("make %s a shared mount: %w", netnsDir, err)
		}
	})
	return netnsDirErr
}

var (
	netnsDirOnce sync.Once
	netnsDirErr  error
)

// deleteNamedNamespace unmounts /run/netns/<name> and removes it. The name can be mounted
// more than once: `ip netns add` turns /run/netns into a recursive bind mount of itself, which
// copies the mounts already there, so one unmount (netns.DeleteNamed's) can leave the name
// busy. Unmounting until nothing is mounted makes deletion work whoever created what.
func deleteNamedNamespace(name string) error {
	path := filepath.Join(netnsDir, name)
	for range 16 {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			break // EINVAL: not a mount point any more; ENOENT: gone
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete network namespace %s: %w", name, err)
	}
	return nil
}
