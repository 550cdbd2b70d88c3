package bmc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Credentials log in to a BMC.
type Credentials struct {
	Username string
	Password string
}

// Target is everything needed to open a client to one BMC.
type Target struct {
	Address            Address
	Credentials        Credentials
	InsecureSkipVerify bool
}

// fingerprint identifies a target without keeping its password in a readable key.
func (t Target) fingerprint() string {
	h := sha256.New()
	for _, s := range []string{t.Address.String(), t.Credentials.Username, t.Credentials.Password} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if t.InsecureSkipVerify {
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Connector opens a client to a target.
type Connector func(ctx context.Context, t Target) (Client, error)

// ByProtocol is the connector the manager uses: IPMI addresses go to ipmi, every other (Redfish)
// one to redfish.
func ByProtocol(redfish, ipmi Connector) Connector {
	return func(ctx context.Context, t Target) (Client, error) {
		if t.Address.Protocol() == metalv1alpha1.BMCProtocolIPMI {
			return ipmi(ctx, t)
		}
		return redfish(ctx, t)
	}
}

// Cache keeps one open client per BMC, so reconciles reuse a session instead of logging in each
// time. A client is replaced when the BMC's address, credentials or TLS setting change, and
// dropped on Invalidate (e.g. after an authentication failure) or Forget (BMC deleted).
type Cache struct {
	connect Connector

	mu      sync.Mutex
	entries map[string]*cacheEntry
}

type cacheEntry struct {
	mu          sync.Mutex // serialises connects to one BMC without blocking others
	fingerprint string
	client      Client
}

// NewCache returns an empty cache that opens clients with connect.
func NewCache(connect Connector) *Cache {
	return &Cache{connect: connect, entries: map[string]*cacheEntry{}}
}

// Get returns the cached client for the BMC called name, connecting when there is none or the
// target changed.
func (c *Cache) Get(ctx context.Context, name string, t Target) (Client, error) {
	c.mu.Lock()
	e, ok := c.entries[name]
	if !ok {
		e = &cacheEntry{}
		c.entries[name] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	fp := t.fingerprint()
	if e.client != nil && e.fingerprint == fp {
		return e.client, nil
	}
	if e.client != nil {
		e.client.Close()
		e.client = nil
	}
	client, err := c.connect(ctx, t)
	if err != nil {
		return nil, err
	}
	e.client, e.fingerprint = client, fp
	return client, nil
}

// Invalidate closes and drops the BMC's client; the next Get reconnects.
func (c *Cache) Invalidate(name string) {
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		e.client.Close()
		e.client = nil
	}
}

// Forget closes the BMC's client and removes its entry.
func (c *Cache) Forget(name string) {
	c.Invalidate(name)
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}

// Len is the number of BMCs with an entry.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
