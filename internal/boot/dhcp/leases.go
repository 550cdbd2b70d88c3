package dhcp

import (
	"encoding/binary"
	"hash/fnv"
	"net"
	"net/netip"
	"sync"
	"time"
)

// offerHold is how long an address offered but not yet requested stays set aside for the MAC
// it was offered to: long enough for a slow PXE ROM to send its REQUEST.
const offerHold = time.Minute

// LeaseTable hands out addresses of a range in full mode.
//
// A MAC keeps its address across restarts of the boot service without any state on disk: its
// preferred address is derived from the MAC (a hash into the range), so a restarted service
// offers it the same one. Only when that address is held by another MAC does the table fall
// back to the next free address after it; a client renewing or rebooting asks for the address
// it has (option 50 or ciaddr) and keeps it if nobody else holds it. The table never pings an
// address before offering it (that costs iPXE seconds per boot): the range must be dedicated to
// the boot service.
type LeaseTable struct {
	start, end netip.Addr
	size       uint32
	exclude    netip.Addr // the server's own address, never handed out
	leaseTime  time.Duration
	now        func() time.Time

	mu    sync.Mutex
	byIP  map[netip.Addr]lease
	byMAC map[string]netip.Addr
}

type lease struct {
	mac     string // "" for a declined address
	expires time.Time
}

// NewLeaseTable is a table for the addresses start..end (inclusive, IPv4), never handing out
// exclude. now is the clock (time.Now when nil).
func NewLeaseTable(start, end, exclude netip.Addr, leaseTime time.Duration, now func() time.Time) *LeaseTable {
	if now == nil {
		now = time.Now
	}
	s, e := ipv4Uint(start), ipv4Uint(end)
	return &LeaseTable{start: start, end: end, size: e - s + 1, exclude: exclude, leaseTime: leaseTime, now: now,
		byIP: map[netip.Addr]lease{}, byMAC: map[string]netip.Addr{}}
}

// Contains says whether ip is in the range.
func (t *LeaseTable) Contains(ip netip.Addr) bool {
	return ip.Is4() && t.start.Compare(ip) <= 0 && ip.Compare(t.end) <= 0 && ip != t.exclude
}

// Preferred is the address the MAC is offered first: a stable hash of the MAC into the range.
func (t *LeaseTable) Preferred(mac net.HardwareAddr) netip.Addr {
	h := fnv.New32a()
	_, _ = h.Write(mac)
	return uintIPv4(ipv4Uint(t.start) + h.Sum32()%t.size)
}

// Offer picks an address for mac and sets it aside briefly: the one it already holds, else the
// one it asks for if free, else its preferred one, else the next free one after that. It
// returns false when the range is full.
func (t *LeaseTable) Offer(mac net.HardwareAddr, requested netip.Addr) (netip.Addr, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := mac.String()
	now := t.now()
	if ip, ok := t.byMAC[key]; ok && t.freeFor(ip, key, now) {
		t.hold(ip, key, now.Add(offerHold))
		return ip, true
	}
	if requested.IsValid() && t.Contains(requested) && t.freeFor(requested, key, now) {
		t.hold(requested, key, now.Add(offerHold))
		return requested, true
	}
	first := ipv4Uint(t.Preferred(mac))
	base := ipv4Uint(t.start)
	for i := uint32(0); i < t.size; i++ {
		ip := uintIPv4(base + (first-base+i)%t.size)
		if ip != t.exclude && t.freeFor(ip, key, now) {
			t.hold(ip, key, now.Add(offerHold))
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// Commit leases ip to mac for the lease time (a REQUEST). It refuses an address out of range or
// held by another MAC.
func (t *LeaseTable) Commit(mac net.HardwareAddr, ip netip.Addr) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := mac.String()
	now := t.now()
	if !t.Contains(ip) || !t.freeFor(ip, key, now) {
		return false
	}
	t.hold(ip, key, now.Add(t.leaseTime))
	return true
}

// Release frees mac's address if it is ip (a RELEASE, or a REQUEST that chose another server).
func (t *LeaseTable) Release(mac net.HardwareAddr, ip netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := mac.String()
	held, ok := t.byMAC[key]
	if !ok || (ip.IsValid() && held != ip) {
		return
	}
	delete(t.byMAC, key)
	if l, ok := t.byIP[held]; ok && l.mac == key {
		delete(t.byIP, held)
	}
}

// Decline sets ip aside for a lease time: a client found it in use (DHCPDECLINE), so something
// the table does not know about has it.
func (t *LeaseTable) Decline(mac net.HardwareAddr, ip netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.Contains(ip) {
		return
	}
	if l, ok := t.byIP[ip]; ok && l.mac != "" && l.mac != mac.String() {
		return // another client's lease: a forged decline must not take it away
	}
	delete(t.byMAC, mac.String())
	t.byIP[ip] = lease{expires: t.now().Add(t.leaseTime)}
}

// Address is the address mac holds now, offered or leased (false when none): the boot service
// serves a boot's secrets only to it.
func (t *LeaseTable) Address(mac net.HardwareAddr) (netip.Addr, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ip, ok := t.byMAC[mac.String()]
	if !ok {
		return netip.Addr{}, false
	}
	if l, held := t.byIP[ip]; !held || l.mac != mac.String() || !t.now().Before(l.expires) {
		return netip.Addr{}, false
	}
	return ip, true
}

// Holder is the MAC holding ip now ("" when free or declined).
func (t *LeaseTable) Holder(ip netip.Addr) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.byIP[ip]; ok && t.now().Before(l.expires) {
		return l.mac
	}
	return ""
}

func (t *LeaseTable) freeFor(ip netip.Addr, mac string, now time.Time) bool {
	l, ok := t.byIP[ip]
	return !ok || l.mac == mac || !now.Before(l.expires)
}

func (t *LeaseTable) hold(ip netip.Addr, mac string, until time.Time) {
	if old, ok := t.byMAC[mac]; ok && old != ip {
		delete(t.byIP, old)
	}
	if l, ok := t.byIP[ip]; ok && l.mac != mac {
		delete(t.byMAC, l.mac) // an expired lease of another MAC
	} else if ok && l.expires.After(until) {
		// The MAC's own lease outlasts this hold: a DISCOVER from a client that holds its
		// address (it may never REQUEST again) must not shorten the lease it believes in.
		until = l.expires
	}
	t.byIP[ip] = lease{mac: mac, expires: until}
	t.byMAC[mac] = ip
}

func ipv4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func uintIPv4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
