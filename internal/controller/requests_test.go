package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
)

// apiRequest is one HTTP request the operator's manager sent to the apiserver.
type apiRequest struct {
	Method string
	// Path is the request's path, without its query.
	Path string
	Code int
	// Body is the start of a write's body, for messages.
	Body string
	// Reconcile is the reconcile that sent it; empty for the cache's lists and watches, the
	// event broadcaster, and the registry's handlers.
	Reconcile types.UID
}

// Mutating says whether the request writes: create, update, patch or delete.
func (r apiRequest) Mutating() bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Event says whether the request records a Kubernetes event.
func (r apiRequest) Event() bool {
	res := r.Resource()
	return res == "events" || res == "events (collection)"
}

// Resource is the request's resource, its subresource and whether it names an object:
// "servers/status", "serverclaims (collection)".
func (r apiRequest) Resource() string {
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	if len(parts) > 0 && parts[0] == "apis" && len(parts) > 3 {
		parts = parts[3:]
	} else if len(parts) > 2 {
		parts = parts[2:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return r.Path
	case 1:
		return parts[0] + " (collection)"
	case 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

func (r apiRequest) String() string {
	if r.Body != "" {
		return fmt.Sprintf("%s %s → %d: %s", r.Method, r.Path, r.Code, r.Body)
	}
	return fmt.Sprintf("%s %s → %d", r.Method, r.Path, r.Code)
}

// reconcileRecord is one reconcile: the object it was for (its first read, by kind) and the
// requests it sent.
type reconcileRecord struct {
	ID       types.UID
	Kind     string
	Key      client.ObjectKey
	Requests []apiRequest
}

// Writes are the reconcile's mutating requests.
func (r reconcileRecord) Writes() []apiRequest {
	var out []apiRequest
	for _, q := range r.Requests {
		if q.Mutating() {
			out = append(out, q)
		}
	}
	return out
}

// requestLog records every request the operator's manager sends to the apiserver, through a
// counting http.RoundTripper around its rest.Config, and which object each reconcile was for,
// through a client that notes each reconcile's first read. Every reconciler's first call is the
// Get of its own object, from the cache, so that read says whose reconcile it is.
type requestLog struct {
	mu       sync.Mutex
	requests []apiRequest
	// reconciles in the order they began; seq is where each began in requests.
	reconciles []*reconcileRecord
	seq        []int
	byID       map[types.UID]*reconcileRecord
}

func newRequestLog() *requestLog { return &requestLog{byID: map[types.UID]*reconcileRecord{}} }

// Wrap is a transport wrapper for rest.Config.Wrap.
func (l *requestLog) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		q := apiRequest{Method: req.Method, Path: req.URL.Path, Reconcile: ctrlcontroller.ReconcileIDFromContext(req.Context())}
		if q.Mutating() && req.Body != nil {
			body, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			q.Body = string(body[:min(len(body), 4000)])
		}
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			q.Code = resp.StatusCode
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.requests = append(l.requests, q)
		if r := l.byID[q.Reconcile]; r != nil {
			r.Requests = append(r.Requests, q)
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// NewClient builds the operator's client (a client.NewClientFunc) that notes reconciles.
func (l *requestLog) NewClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return noteReconciles{Client: c, log: l}, nil
}

func (l *requestLog) began(ctx context.Context, key client.ObjectKey, obj client.Object) {
	id := ctrlcontroller.ReconcileIDFromContext(ctx)
	if id == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID[id] != nil {
		return
	}
	r := &reconcileRecord{ID: id, Kind: reflect.TypeOf(obj).Elem().Name(), Key: key}
	l.byID[id] = r
	l.reconciles = append(l.reconciles, r)
	l.seq = append(l.seq, len(l.requests))
}

type noteReconciles struct {
	client.Client
	log *requestLog
}

func (c noteReconciles) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.log.began(ctx, key, obj)
	return c.Client.Get(ctx, key, obj, opts...)
}

// requestMark is a point in the log; the views below take what came after one.
type requestMark struct{ requests, reconciles int }

func (l *requestLog) Mark() requestMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	return requestMark{len(l.requests), len(l.reconciles)}
}

// Since returns every request sent after the mark.
func (l *requestLog) Since(m requestMark) []apiRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]apiRequest(nil), l.requests[m.requests:]...)
}

// Reconciles returns the reconciles of kind (and name, when not empty) begun after the mark,
// each with the requests it has sent so far.
func (l *requestLog) Reconciles(m requestMark, kind, name string) []reconcileRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []reconcileRecord
	for _, r := range l.reconciles[m.reconciles:] {
		if r.Kind == kind && (name == "" || r.Key.Name == name) {
			c := *r
			c.Requests = append([]apiRequest(nil), r.Requests...)
			out = append(out, c)
		}
	}
	return out
}

// summarize counts requests by "METHOD resource", for logs and reports.
func summarize(reqs []apiRequest) string {
	counts := map[string]int{}
	for _, q := range reqs {
		counts[q.Method+" "+q.Resource()]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%4d  %s\n", counts[k], k)
	}
	return b.String()
}

// recordOperatorRequests restarts the operator with a requestLog around its transport and its
// client, and restores the suite's operator when the test ends.
func recordOperatorRequests(t *testing.T) *requestLog {
	t.Helper()
	l := newRequestLog()
	require.NoError(t, stopOperator())
	operatorTransport, operatorClient = l.Wrap, l.NewClient
	require.NoError(t, startOperator())
	t.Cleanup(func() {
		assert.NoError(t, stopOperator())
		operatorTransport, operatorClient = nil, nil
		assert.NoError(t, startOperator(), "restoring the suite's operator")
	})
	return l
}
