package bmcsim

import (
	"net/http"
	"strings"
	"time"
)

// endpoint is what one URL offers. Handlers are built per request around the resource the
// path named, so nothing is stored per resource and a BMC stays small.
type endpoint struct {
	get, patch, post, del http.HandlerFunc
	public                string // methods answered without credentials, e.g. "GET HEAD"
}

func (e endpoint) handler(method string) http.HandlerFunc {
	switch method {
	case http.MethodGet, http.MethodHead:
		return e.get
	case http.MethodPatch:
		return e.patch
	case http.MethodPost:
		return e.post
	case http.MethodDelete:
		return e.del
	}
	return nil
}

func (e endpoint) allow() string {
	var methods []string
	for _, m := range []struct {
		name string
		h    http.HandlerFunc
	}{{"GET, HEAD", e.get}, {"PATCH", e.patch}, {"POST", e.post}, {"DELETE", e.del}} {
		if m.h != nil {
			methods = append(methods, m.name)
		}
	}
	return strings.Join(methods, ", ")
}

func (e endpoint) isPublic(method string) bool {
	return e.public != "" && strings.Contains(" "+e.public+" ", " "+method+" ")
}

// serveRedfish authenticates before it looks the path up, so unauthenticated clients learn
// nothing about which resources exist (401 everywhere but the service root and login).
func (b *BMC) serveRedfish(w http.ResponseWriter, r *http.Request) {
	// Updates whose task has ended take effect before anything is read (update.go).
	b.model.settle()
	ep, found := b.route(r.URL.Path)
	if !found || !ep.isPublic(r.Method) {
		if !b.auth.authenticate(r, time.Now()) {
			b.stats.authFailures.Add(1)
			writeUnauthorized(w, r)
			return
		}
	}
	if !found {
		writeNotFound(w, r)
		return
	}
	h := ep.handler(r.Method)
	if h == nil {
		writeMethodNotAllowed(w, r, ep.allow())
		return
	}
	w.Header().Set("Allow", ep.allow())
	h(w, r)
}

// splitPath lower-cases and splits a request path. Routing ignores case and trailing or
// doubled slashes, so links rendered under LowercaseIDs and TrailingSlashIDs resolve.
func splitPath(p string) []string {
	var segs []string
	for seg := range strings.SplitSeq(strings.ToLower(p), "/") {
		if seg != "" {
			segs = append(segs, seg)
		}
	}
	return segs
}

// render answers GET with a body built at request time.
func render(body func() any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, r, http.StatusOK, body()) }
}

// locked renders a body that reads power or boot state, under the model lock.
func (m *model) locked(body func(now time.Time) obj) http.HandlerFunc {
	return render(func() any {
		m.mu.Lock()
		defer m.mu.Unlock()
		return body(time.Now())
	})
}

func get(body func() any) endpoint { return endpoint{get: render(body)} }

func (b *BMC) route(path string) (endpoint, bool) {
	segs := splitPath(path)
	if len(segs) == 0 || segs[0] != "redfish" {
		return endpoint{}, false
	}
	if len(segs) == 1 {
		return endpoint{get: render(func() any { return obj{"v1": rootPath} }), public: "GET HEAD"}, true
	}
	if segs[1] != "v1" {
		return endpoint{}, false
	}
	m, rest := b.model, segs[2:]
	if len(rest) == 0 {
		return endpoint{get: render(func() any { return m.serviceRoot() }), public: "GET HEAD"}, true
	}
	switch rest[0] {
	case "systems":
		return b.routeSystems(rest[1:])
	case "managers":
		switch {
		case len(rest) == 1:
			return get(func() any { return m.managersCollection() }), true
		case len(rest) == 2 && strings.EqualFold(rest[1], m.prof.mgrID):
			return endpoint{get: m.locked(func(time.Time) obj { return m.manager() })}, true
		case len(rest) >= 3 && strings.EqualFold(rest[1], m.prof.mgrID) && rest[2] == "virtualmedia":
			return b.routeMedia(m.managerPath()+"/VirtualMedia", m.managerMedia(), rest[3:])
		case len(rest) == 6 && strings.EqualFold(rest[1], m.prof.mgrID) && m.prof.managerAttributes &&
			strings.EqualFold("/"+strings.Join(rest[2:], "/"), dellAttributesTail+m.prof.mgrID):
			return endpoint{get: m.locked(func(time.Time) obj { return m.managerAttributesResource() }), patch: b.patchManagerAttributes}, true
		case len(rest) >= 3 && strings.EqualFold(rest[1], m.prof.mgrID) && rest[2] == "jobs" && m.prof.dellJobs:
			return b.routeJobs(rest[3:])
		case len(rest) == 5 && strings.EqualFold(rest[1], m.prof.mgrID) && m.dellCd() &&
			strings.EqualFold("/"+strings.Join(rest[2:], "/"), dellImportPathTail):
			return endpoint{post: b.importSystemConfiguration}, true
		}
	case "taskservice":
		return b.routeTasks(rest[1:])
	case "chassis":
		if len(rest) == 1 {
			return get(func() any { return m.chassisCollection() }), true
		}
		if s := m.findChassis(rest[1]); s != nil && len(rest) == 2 {
			return endpoint{get: m.locked(func(now time.Time) obj { return m.chassis(s, now) })}, true
		}
	case "sessionservice":
		return b.routeSessions(rest[1:])
	case "accountservice":
		if len(rest) == 1 {
			return get(func() any { return m.accountService() }), true
		}
	case "updateservice":
		return b.routeUpdateService(rest[1:])
	case "registries":
		return b.routeRegistries(rest[1:])
	}
	return endpoint{}, false
}

func (b *BMC) routeSessions(rest []string) (endpoint, bool) {
	m := b.model
	switch {
	case len(rest) == 0:
		return get(func() any { return m.sessionService() }), true
	case rest[0] != "sessions":
		return endpoint{}, false
	case len(rest) == 1:
		return endpoint{
			get:    render(func() any { return m.sessionsCollection(b.auth.live(time.Now())) }),
			post:   b.login,
			public: "POST",
		}, true
	case len(rest) == 2:
		s, ok := b.auth.lookup(rest[1])
		if !ok {
			return endpoint{}, false
		}
		return endpoint{get: render(func() any { return m.sessionResource(s) }), del: b.logout(s.id)}, true
	}
	return endpoint{}, false
}

// routeSystems resolves everything under /Systems by following the spec, never by trusting
// that an Id spells a path: the lookups compare Ids case-insensitively.
func (b *BMC) routeSystems(rest []string) (endpoint, bool) {
	m := b.model
	if len(rest) == 0 {
		return get(b.systemsCollection), true
	}
	s := m.findSystem(rest[0])
	if s == nil {
		if len(rest) == 1 {
			return b.extraSystem(rest[0])
		}
		return endpoint{}, false
	}
	rest = rest[1:]
	if len(rest) == 0 {
		if f := b.hostile(); f.HugeSystem > 0 {
			return endpoint{get: b.hugeSystem(s, f.HugeSystem, f.HugeSystemChunked), patch: b.patchSystem(s)}, true
		}
		return endpoint{get: b.getSystem(s), patch: b.patchSystem(s)}, true
	}
	sub, n := rest[0], len(rest)
	switch {
	case sub == "processors" && n == 1:
		return get(func() any { return m.processorCollection(s) }), true
	case sub == "processors" && n == 2:
		for _, p := range s.spec.Processors {
			if strings.EqualFold(p.ID, rest[1]) {
				return get(func() any { return m.processor(s, p) }), true
			}
		}
	case sub == "memory" && n == 1:
		return get(func() any { return m.memoryCollection(s) }), true
	case sub == "memory" && n == 2:
		for _, d := range m.dimms(s) {
			if strings.EqualFold(d.ID, rest[1]) {
				return get(func() any { return m.memory(s, d) }), true
			}
		}
	case sub == "storage" && n == 1:
		return get(func() any { return m.storageCollection(s) }), true
	case sub == "storage" && n == 2 && rest[1] == "1":
		return get(func() any { return m.storage(s) }), true
	case sub == "storage" && n == 4 && rest[1] == "1" && rest[2] == "drives":
		for _, d := range s.spec.Drives {
			if strings.EqualFold(d.ID, rest[3]) {
				return get(func() any { return m.drive(s, d) }), true
			}
		}
	case sub == "ethernetinterfaces" && n == 1:
		return get(func() any { return m.nicCollection(s) }), true
	case sub == "ethernetinterfaces" && n == 2:
		for _, nic := range s.spec.NICs {
			if strings.EqualFold(nic.ID, rest[1]) {
				return get(func() any { return m.nic(s, nic) }), true
			}
		}
	case sub == "secureboot" && n == 1 && !m.q.NoSecureBoot:
		return b.secureBootEndpoint(s), true
	case sub == "bios" && n == 1:
		return endpoint{get: m.locked(func(time.Time) obj { return m.bios(s) })}, true
	case sub == "bios" && n == 2 && rest[1] == "settings":
		return endpoint{get: m.locked(func(time.Time) obj { return m.biosSettings(s) }), patch: b.patchBIOSSettings(s)}, true
	case sub == "virtualmedia":
		return b.routeMedia(s.path+"/VirtualMedia", s.systemMedia(), rest[1:])
	case sub == "resetactioninfo" && n == 1 && !m.q.NoResetAction:
		return get(func() any { return m.resetActionInfo(s) }), true
	case sub == "actions" && n == 2 && rest[1] == "computersystem.reset" && !m.q.NoResetAction:
		return endpoint{post: b.resetSystem(s)}, true
	}
	return endpoint{}, false
}
