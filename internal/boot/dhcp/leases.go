package dhcp

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"
)

// offerHold is how long an address offered but not yet requested stays set aside for the MAC
// it was offered to: long enough for a slow PXE ROM to send its REQUEST.
const offerHold = time.Minute

// A DECLINE is honoured only as the end of the exchange that leased the address: from the MAC
// it was acknowledged to, within declineWindow of that ACK (a client's conflict check, RFC
// 5227, ends within ~10 s of it), and while that MAC has fewer than maxDeclinesPerMAC addresses
// set aside by its earlier declines. Any other DECLINE is ignored: a forged one must not set
// free addresses aside, nor a client looping through exchanges set the range aside.
const (
	declineWindow     = time.Minute
	maxDeclinesPerMAC = 2
)

// LeaseTable hands out addresses of a range in full mode.
//
// A MAC's preferred address is derived from the MAC (a hash into the range), so that a MAC is
// offered the same address boot after boot. Only when that address is held by another MAC does
// the table fall back to the next free address after it. What the table holds is kept across
// restarts by its owner (Snapshot, Restore, Notify: the boot service keeps it in a ConfigMap),
// so that a restarted service offers no leased address to another MAC. The table never pings an
// address before offering it (that costs iPXE seconds per boot): the range must be dedicated to
// the boot service.
type LeaseTable struct {
	start, end netip.Addr
	size       uint32
	exclude    netip.Addr // the server's own address, never handed out
	leaseTime  time.Duration
	now        func() time.Time

	mu       sync.Mutex
	byIP     map[netip.Addr]lease
	byMAC    map[string]netip.Addr
	onChange func()
}

type lease struct {
	mac     string // "" for a declined address
	expires time.Time
	// acked is when the lease was last acknowledged (zero for an offer not yet requested, and
	// for a lease restored from a snapshot); declinedBy is who declined a declined address.
	acked      time.Time
	declinedBy string
}

// Lease is one entry of a Snapshot: an address leased (or offered) to MAC, or set aside after
// a DECLINE (MAC empty), until Expires.
type Lease struct {
	IP      netip.Addr
	MAC     string
	Expires time.Time
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
	l := t.byIP[ip]
	l.acked = now
	t.byIP[ip] = l
	t.changed()
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
	t.changed()
}

// Decline sets ip aside for a lease time when mac found it in use (DHCPDECLINE), so something
// the table does not know about has it; only within the exchange that leased it (declineWindow,
// maxDeclinesPerMAC). It says why when it ignores the DECLINE.
func (t *LeaseTable) Decline(mac net.HardwareAddr, ip netip.Addr) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := mac.String()
	now := t.now()
	l, ok := t.byIP[ip]
	switch {
	case !ok || l.mac != key || !now.Before(l.expires):
		return fmt.Errorf("%s is not leased to %s", addrOrNone(ip), key)
	case l.acked.IsZero() || now.Sub(l.acked) > declineWindow:
		return fmt.Errorf("%s was not acknowledged to %s within the last %s", ip, key, declineWindow)
	}
	declined := 0
	for _, o := range t.byIP {
		if o.mac == "" && o.declinedBy == key && now.Before(o.expires) {
			declined++
		}
	}
	if declined >= maxDeclinesPerMAC {
		return fmt.Errorf("%s already has %d declined addresses set aside", key, declined)
	}
	delete(t.byMAC, key)
	t.byIP[ip] = lease{expires: now.Add(t.leaseTime), declinedBy: key}
	t.changed()
	return nil
}

// Notify makes f be called after every change worth keeping (a lease acknowledged, released
// or declined; offers are not). f must not block: it is called with the table locked.
func (t *LeaseTable) Notify(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onChange = f
}

func (t *LeaseTable) changed() {
	if t.onChange != nil {
		t.onChange()
	}
}

// Snapshot is what the table holds and has not expired, by address.
func (t *LeaseTable) Snapshot() []Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make([]Lease, 0, len(t.byIP))
	for ip, l := range t.byIP {
		if now.Before(l.expires) {
			out = append(out, Lease{IP: ip, MAC: l.mac, Expires: l.expires})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

// Restore adds leases (a Snapshot, perhaps of another instance) to the table. What the table
// holds wins: an address or a MAC it already has is not taken from a snapshot, nor is an
// expired lease or an address out of the range. It returns how many were added.
func (t *LeaseTable) Restore(leases []Lease) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	added := 0
	for _, in := range leases {
		if !t.Contains(in.IP) || !now.Before(in.Expires) {
			continue
		}
		if l, ok := t.byIP[in.IP]; ok && now.Before(l.expires) {
			continue
		}
		if in.MAC != "" {
			if held, ok := t.byMAC[in.MAC]; ok && held != in.IP {
				if l, ok := t.byIP[held]; ok && l.mac == in.MAC && now.Before(l.expires) {
					continue
				}
			}
			t.byMAC[in.MAC] = in.IP
		}
		t.byIP[in.IP] = lease{mac: in.MAC, expires: in.Expires}
		added++
	}
	return added
}

func addrOrNone(ip netip.Addr) string {
	if !ip.IsValid() {
		return "no address"
	}
	return ip.String()
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
