package registry

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/hwrecord"
	"github.com/ironfleet/ironfleet/internal/identity"
)

// authenticated is a decoded request body that passed the token check: its server, the probe
// boot its token is for, and what the body says about its machine.
type authenticated struct {
	server *metalv1alpha1.Server
	// cached says server is the cache's copy, which may be behind the API's; else it is the
	// API's, read for this request.
	cached bool
	boot   string
	about  func() about
	remote string
}

// about is what a request body says about the machine that sent it: information to check
// against the Server the token names, never what finds the Server.
type about struct {
	// systemUUID is the SMBIOS UUID the probe read (may be empty, or a placeholder).
	systemUUID string
	// macs are the MACs of the host's NICs; nil for a request that lists none (a boot state).
	macs []string
	// listsNICs says the body is a report, whose NICs are compared with the server's.
	listsNICs bool
}

// decodeAndAuthorize checks the bearer token, finds the server the token names and checks that
// the token is for its current probe boot, all before reading the body; then reads a bounded,
// strict JSON body into v and checks that it is about that server's machine. It writes the
// refusal itself and returns nil when the request is refused. Order matters, so that nothing a
// client without a good token sends is read: 401 for no token, then 403 for a token this
// registry did not mint, then 404 for a server that does not exist, then 403 for a boot that is
// over (each of these closes the connection, its body unread); then 413/400 on the body (too
// big, too long a list, too deep, not strict JSON), then 403 for a body about another machine.
func (s *Server) decodeAndAuthorize(w http.ResponseWriter, r *http.Request, v any, aboutOf func() about) *authenticated {
	auth := s.authenticate(w, r)
	if auth == nil {
		return nil
	}
	if status, err := decodeBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), v); err != nil {
		writeError(w, status, "%v", err)
		return nil
	}
	auth.about = aboutOf
	// The cache may be behind the report the machine check compares with: what it refuses is
	// asked of the API before it is refused.
	if otherMachine(auth.server, aboutOf()) != "" {
		if auth.cached && !s.reread(r.Context(), w, auth) {
			return nil
		}
		if !s.refuseOtherMachine(w, auth) {
			return nil
		}
	}
	return auth
}

// authenticate checks a request's bearer token (an HMAC: no body is needed for it), finds the
// server it names, and checks that it is for the server's current probe boot. It refuses
// the request itself, without reading its body, and returns nil when the token is not good.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) *authenticated {
	// Until the token is found good, a refusal closes the connection with the body unread: a
	// client still sending it may see the connection reset rather than the answer. (Without
	// this, net/http would read up to 256 KiB of the body before answering, as slowly as the
	// client sends it.)
	w.Header().Set("Connection", "close")
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		writeError(w, http.StatusUnauthorized, "a bearer token is required")
		return nil
	}
	name, boot, ok := s.Signer.Verify(strings.TrimSpace(token))
	if !ok {
		s.Log.Info("refused a probe request: its token is not one this registry issued", "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "the token does not belong to any server of this registry")
		return nil
	}
	server, cached, status, err := s.findServer(r.Context(), name)
	if err != nil {
		writeError(w, status, "%v", err)
		return nil
	}
	auth := &authenticated{server: server, cached: cached, boot: boot, about: func() about { return about{} }, remote: r.RemoteAddr}
	// The cache may be behind the boot's start: what it refuses is asked of the API before it
	// is refused. What it lets through may be over already: the write tests that it is not
	// (statusPatch).
	if server.Status.ProbeBoot != boot {
		if auth.cached && !s.reread(r.Context(), w, auth) {
			return nil
		}
		if !s.refuseEndedBoot(w, auth) {
			return nil
		}
	}
	w.Header().Del("Connection")
	return auth
}

// reread reads the server again from the API, and checks again that the token's boot is its
// current one. It writes the refusal itself and returns false when the request is refused.
func (s *Server) reread(ctx context.Context, w http.ResponseWriter, auth *authenticated) bool {
	if s.APIReader != nil {
		var fresh metalv1alpha1.Server
		err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(auth.server), &fresh)
		switch {
		case apierrors.IsNotFound(err):
			writeError(w, http.StatusNotFound, "no server %s", auth.server.Name)
			return false
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, "looking up server %s: %v", auth.server.Name, err)
			return false
		}
		auth.server = &fresh
	}
	auth.cached = false // the API's, or the best there is
	return s.refuseEndedBoot(w, auth)
}

// refuseEndedBoot refuses a request whose token is not for the server's current probe boot.
func (s *Server) refuseEndedBoot(w http.ResponseWriter, auth *authenticated) bool {
	if auth.server.Status.ProbeBoot != auth.boot {
		s.Log.Info("refused a probe request: its boot is over", "server", auth.server.Name, "boot", auth.boot)
		writeError(w, http.StatusForbidden, "the token is for an earlier probe boot of server %s", auth.server.Name)
		return false
	}
	return true
}

// refuseOtherMachine refuses a request about another machine than its token's server.
func (s *Server) refuseOtherMachine(w http.ResponseWriter, auth *authenticated) bool {
	if why := otherMachine(auth.server, auth.about()); why != "" {
		s.Log.Info("refused a probe request: it is about another machine", "server", auth.server.Name, "why", why, "remote", auth.remote)
		writeError(w, http.StatusForbidden, "the request carries server %s's token but is about another machine: %s", auth.server.Name, why)
		return false
	}
	return true
}

// otherMachine says why a request is not about the server's machine, or "" when nothing says it
// is not. The UUID counts only when it is the Server's identity (identity.ServerUUID); the MACs
// only when the Server has a probe's inventory, whose NICs are the host's own (a BMC's list may
// be empty, or name ports the host does not see). A server with neither takes the report on
// its token alone.
func otherMachine(server *metalv1alpha1.Server, a about) string {
	if want := identity.ServerUUID(server); want != "" {
		if got := identity.Normalize(a.systemUUID); got != "" && got != want {
			return fmt.Sprintf("the host reads system UUID %q, and the server's is %s", truncate(got, 64), want)
		}
	}
	if !a.listsNICs {
		return ""
	}
	known := probeMACs(server)
	if len(known) == 0 {
		return ""
	}
	for _, mac := range a.macs {
		if known[mac] {
			return ""
		}
	}
	if len(a.macs) == 0 {
		return fmt.Sprintf("the report lists no NIC, and the server's are %s", listMACs(known))
	}
	return fmt.Sprintf("none of the host's NICs (%s) is one of the server's (%s)", strings.Join(capList(a.macs, 8), ", "), listMACs(known))
}

// probeMACs are the MACs of the NICs the probe reported last time, if the server's inventory is
// a probe's.
func probeMACs(server *metalv1alpha1.Server) map[string]bool {
	inv := server.Status.Inventory
	if inv == nil || inv.Source != metalv1alpha1.InventorySourceProbe {
		return nil
	}
	known := map[string]bool{}
	for _, mac := range nicMACs(inv.NetworkInterfaces) {
		known[mac] = true
	}
	return known
}

// nicMACs are the NICs' usable MACs as net.HardwareAddr prints them (lower case, colons): an
// all-zero or broadcast address names no NIC.
func nicMACs(nics []metalv1alpha1.NetworkInterface) []string {
	return hwrecord.MACs(nics)
}

func listMACs(set map[string]bool) string {
	macs := make([]string, 0, len(set))
	for mac := range set {
		macs = append(macs, mac)
	}
	sort.Strings(macs)
	return strings.Join(capList(macs, 8), ", ")
}

func capList(ss []string, n int) []string {
	if len(ss) > n {
		return append(ss[:n:n], "…")
	}
	return ss
}
