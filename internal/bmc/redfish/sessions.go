package redfish

import (
	"bytes"
	"crypto/tls"

	"k8s.io/utils/lru"
)

// sessionCache keeps BMCs' TLS sessions for resumption, as Go's LRU cache does, but each one
// serialized (the ticket and tls.SessionState's encoding, certificates as DER) rather than as
// a live ClientSessionState holding the BMC's parsed certificate chain: a kept session costs
// its bytes, and a parsed chain exists only while a connection uses it. Kept parsed, a
// thousand BMCs' sessions held about 5 MiB of certificates in the manager.
type sessionCache struct {
	lru *lru.Cache // key → session; lru.Cache locks itself
}

type session struct{ ticket, state []byte }

func newSessionCache(size int) *sessionCache { return &sessionCache{lru: lru.New(size)} }

// Get is the session kept for key, made whole again; none when it cannot be.
func (c *sessionCache) Get(key string) (*tls.ClientSessionState, bool) {
	v, ok := c.lru.Get(key)
	if !ok {
		return nil, false
	}
	s := v.(session)
	state, err := tls.ParseSessionState(s.state)
	if err == nil {
		var cs *tls.ClientSessionState
		if cs, err = tls.NewResumptionState(s.ticket, state); err == nil {
			return cs, true
		}
	}
	c.lru.Remove(key)
	return nil, false
}

// Put keeps cs for key; a nil cs forgets key's session (crypto/tls asks so when a server
// refuses a resumption).
func (c *sessionCache) Put(key string, cs *tls.ClientSessionState) {
	if cs == nil {
		c.lru.Remove(key)
		return
	}
	ticket, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return
	}
	data, err := state.Bytes()
	if err != nil {
		return
	}
	c.lru.Add(key, session{ticket: bytes.Clone(ticket), state: data})
}
