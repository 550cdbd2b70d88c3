package registry

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// MaxBodyBytes bounds a request body; larger ones get 413.
const MaxBodyBytes = 1 << 20

// Server handles probe requests.
type Server struct {
	// Client reads Servers (through the manager's cache) and writes their status.
	Client client.Client
	// APIReader reads a Server around the cache: when the cache does not show the token's boot
	// (it may be behind its start), when a check on the cache's copy would refuse a request or
	// a write's test fails (it may be behind the boot's end, or a report), and to find a Server
	// the cache has not seen yet. Optional.
	APIReader client.Reader
	Signer    *Signer
	// ProbeNamespace holds the probe boots' configurations: the user data endpoint
	// (userdata.go) hands out a claim's user data only to the probe of its server's install
	// boot there. Empty: it hands out none.
	ProbeNamespace string
	Log            logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Handler routes the registry's endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	limit := concurrencyLimit(MaxConcurrentRequests)
	mux.Handle("POST /v1/reports", limit(s.postReport))
	mux.Handle("POST /v1/bootstate", limit(s.postBootState))
	mux.Handle("POST /v1/userdata", limit(s.postUserData))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// apiError is the JSON body of every refusal.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apiError{Error: fmt.Sprintf(format, args...)})
}

// store writes news into the server's status. News the status already has (a boot state sent
// again) is not written. On the cache's copy of the server it is written as a JSON patch that
// tests what the checks relied on (statusPatch); when a test fails, or the cache's copy has the
// news already, the server is read from the API, checked again, and the news is written on that
// version under an optimistic lock, as every writer of a status whole does.
func (s *Server) store(ctx context.Context, w http.ResponseWriter, auth *authenticated, what string, news func(*metalv1alpha1.Server)) bool {
	for {
		server := auth.server.DeepCopy()
		news(server)
		if equality.Semantic.DeepEqual(server.Status, auth.server.Status) {
			if !auth.cached {
				return true
			}
			// The cache may be behind: the API's version may not have it, or the boot may be over.
			if !s.reread(ctx, w, auth) || !s.refuseOtherMachine(w, auth) {
				return false
			}
			continue
		}
		var err error
		if auth.cached {
			patch, perr := statusPatch(auth.boot, auth.server, server, auth.about().listsNICs)
			if perr != nil {
				writeError(w, http.StatusInternalServerError, "storing the %s: %v", what, perr)
				return false
			}
			err = s.Client.Status().Patch(ctx, server, client.RawPatch(types.JSONPatchType, patch))
			if err != nil && (apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
				// A test failed (or the status is really invalid): the API's version says which.
				if !s.reread(ctx, w, auth) || !s.refuseOtherMachine(w, auth) {
					return false
				}
				continue
			}
		} else {
			err = s.Client.Status().Patch(ctx, server, client.MergeFromWithOptions(auth.server, client.MergeFromWithOptimisticLock{}))
		}
		switch {
		case err == nil:
			auth.server = server
			return true
		case apierrors.IsConflict(err):
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "server %s changed while the %s was stored; send it again", server.Name, what)
		case apierrors.IsInvalid(err):
			writeError(w, http.StatusUnprocessableEntity, "storing the %s: %v", what, err)
		case apierrors.IsNotFound(err):
			writeError(w, http.StatusNotFound, "no server %s", server.Name)
		default:
			writeError(w, http.StatusServiceUnavailable, "storing the %s: %v", what, err)
		}
		return false
	}
}

// statusPatch is the JSON patch that writes the status fields news changed, each whole, on a
// version of the server read from the cache. Its first operations test what the checks made on
// that version relied on: that boot is still the server's current probe boot; for a request
// whose NICs were compared with the server's (pinInventory), that the server's state and
// inventory are still those the report was compared with (its source and time, or none); and, when the
// conditions change, that they are still those the news was set on (a list is written whole,
// and another writer's condition must not be lost). Other status fields are not touched, so the
// cache's compact inventory does not matter: a report's inventory replaces the server's whole,
// never merged into what the cache kept.
func statusPatch(boot string, original, server *metalv1alpha1.Server, pinInventory bool) ([]byte, error) {
	before, err := fields(&original.Status)
	if err != nil {
		return nil, err
	}
	after, err := fields(&server.Status)
	if err != nil {
		return nil, err
	}
	ops := []map[string]any{{"op": "test", "path": "/status/probeBoot", "value": boot}}
	if pinInventory {
		// Whether a report replaces the record depends on the state too (recordReport).
		var st any
		if original.Status.State != "" {
			st = original.Status.State
		}
		ops = append(ops, map[string]any{"op": "test", "path": "/status/state", "value": st})
		if inv := original.Status.Inventory; inv == nil {
			ops = append(ops, map[string]any{"op": "test", "path": "/status/inventory", "value": nil})
		} else {
			var at any
			if inv.ReportedAt != nil {
				at = inv.ReportedAt
			}
			var source any
			if inv.Source != "" {
				source = inv.Source
			}
			ops = append(ops,
				map[string]any{"op": "test", "path": "/status/inventory/source", "value": source},
				map[string]any{"op": "test", "path": "/status/inventory/reportedAt", "value": at})
		}
	}
	var changes []map[string]any
	for _, f := range slices.Sorted(maps.Keys(before)) {
		if _, kept := after[f]; !kept {
			changes = append(changes, map[string]any{"op": "remove", "path": "/status/" + f})
		}
	}
	for _, f := range slices.Sorted(maps.Keys(after)) {
		if bytes.Equal(before[f], after[f]) {
			continue
		}
		if f == "conditions" {
			was := before[f]
			if was == nil {
				was = json.RawMessage("null")
			}
			ops = append(ops, map[string]any{"op": "test", "path": "/status/conditions", "value": was})
		}
		changes = append(changes, map[string]any{"op": "add", "path": "/status/" + f, "value": after[f]})
	}
	return json.Marshal(append(ops, changes...))
}

// fields are a status's top-level fields, as JSON.
func fields(st *metalv1alpha1.ServerStatus) (map[string]json.RawMessage, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	return out, json.Unmarshal(data, &out)
}

// decodeBody reads exactly one strict JSON object into v, and says which status refuses a body
// that is not one: 413 past the size limit, 400 otherwise. The body is read whole and its lists
// counted (checkShape) before anything is decoded from it.
func decodeBody(body io.Reader, v any) (int, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", MaxBodyBytes)
		}
		return http.StatusBadRequest, fmt.Errorf("reading the body: %v", err)
	}
	if err := checkShape(data); err != nil {
		return http.StatusBadRequest, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("malformed JSON: %v", err)
	}
	if dec.More() {
		return http.StatusBadRequest, errors.New("malformed JSON: trailing data after the object")
	}
	return http.StatusOK, nil
}

// findServer reads the server a token names: from the cache, or, when the cache has not seen
// it (a Server made a moment ago), from the API.
func (s *Server) findServer(ctx context.Context, name string) (server *metalv1alpha1.Server, cached bool, status int, err error) {
	server, cached = &metalv1alpha1.Server{}, true
	err = s.Client.Get(ctx, client.ObjectKey{Name: name}, server)
	if apierrors.IsNotFound(err) && s.APIReader != nil {
		cached = false
		err = s.APIReader.Get(ctx, client.ObjectKey{Name: name}, server)
	}
	switch {
	case err == nil:
		return server, cached, 0, nil
	case apierrors.IsNotFound(err):
		return nil, false, http.StatusNotFound, fmt.Errorf("no server %s", name)
	default:
		return nil, false, http.StatusServiceUnavailable, fmt.Errorf("looking up server %s: %w", name, err)
	}
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// postReport stores an inventory report in its Server's status.
func (s *Server) postReport(w http.ResponseWriter, r *http.Request) {
	// Stamped on arrival, before the boot is checked: a report is never younger than the
	// check that let it in.
	received := metav1.NewTime(s.now())
	var rep report.Report
	auth := s.decodeAndAuthorize(w, r, &rep, func() about {
		return about{systemUUID: rep.SystemUUID, macs: nicMACs(rep.Inventory.NetworkInterfaces), listsNICs: true}
	})
	if auth == nil {
		return
	}
	inv := rep.Inventory
	inv.Source = metalv1alpha1.InventorySourceProbe
	inv.ReportedAt = &received
	inv.CollectorVersion = rep.ProbeVersion
	inv.Warnings = capStrings(rep.Warnings, 64)
	var diffs []string
	stored := s.store(r.Context(), w, auth, "report", func(server *metalv1alpha1.Server) {
		diffs = recordReport(server, &inv, received)
		if rep.Wipe != nil {
			wipe := *rep.Wipe
			wipe.ReportedAt = &received
			server.Status.LastWipe = &wipe
		}
		if rep.Install != nil {
			install := *rep.Install
			install.ReportedAt = &received
			install.Message = truncate(install.Message, 2048)
			server.Status.LastInstall = &install
		}
	})
	if !stored {
		return
	}
	s.Log.Info("stored probe report", "server", auth.server.Name, "disks", len(inv.Storage), "nics", len(inv.NetworkInterfaces), "wipe", rep.Wipe != nil, "install", rep.Install != nil, "hardwareDifferences", len(diffs))
	w.WriteHeader(http.StatusNoContent)
}

// BootState is what the probe says about its own progress.
type BootState struct {
	// SystemUUID is the SMBIOS UUID the probe read: information, checked against the Server's
	// only when that is the Server's identity. Optional.
	SystemUUID string `json:"systemUUID,omitempty"`
	// State is CamelCase: Booted, Collecting, Reporting, Wiping, Failed.
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

var statePattern = regexp.MustCompile(`^[A-Z][A-Za-z]{0,31}$`)

// postBootState records the probe's progress as the Server's Probe condition.
func (s *Server) postBootState(w http.ResponseWriter, r *http.Request) {
	var st BootState
	auth := s.decodeAndAuthorize(w, r, &st, func() about { return about{systemUUID: st.SystemUUID} })
	if auth == nil {
		return
	}
	if !statePattern.MatchString(st.State) {
		writeError(w, http.StatusBadRequest, "state %q is not a CamelCase word", truncate(st.State, 32))
		return
	}
	if !s.store(r.Context(), w, auth, "boot state", func(server *metalv1alpha1.Server) {
		SetProbeCondition(server, st.State, truncate(st.Message, 1024))
	}) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func capStrings(ss []string, n int) []string {
	if len(ss) > n {
		ss = ss[:n]
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = truncate(s, 512)
	}
	return out
}

// Runnable serves the registry over HTTPS until its context ends. It runs on every manager
// replica, not only the leader: probes may reach any of them.
type Runnable struct {
	Addr    string
	Server  *Server
	TLSCert tls.Certificate
	// Listening, when set, is called with the bound address once the listener is open.
	Listening func(addr net.Addr)
}

// NeedLeaderElection reports that the registry serves on every replica.
func (r *Runnable) NeedLeaderElection() bool { return false }

// Start serves until ctx is done.
func (r *Runnable) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", r.Addr)
	if err != nil {
		return fmt.Errorf("registry: listening on %s: %w", r.Addr, err)
	}
	if r.Listening != nil {
		r.Listening(ln.Addr())
	}
	srv := &http.Server{
		Handler:           r.Server.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    MaxHeaderBytes,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{r.TLSCert}},
		Protocols:         http1Only(),
	}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.ServeTLS(netutil.LimitListener(ln, MaxConnections), "", "") }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-errCh:
		return fmt.Errorf("registry: %w", err)
	}
}

// http1Only are HTTP/1.1's protocols alone: HTTP/2 buffers up to 1 MiB of each stream's body
// before the handler looks at it, where HTTP/1.1 leaves a body the registry does not read in the
// kernel's socket buffers.
func http1Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}
