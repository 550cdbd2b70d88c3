package testenv

import (
	"net/http"
	"sync"
)

// Refusals records every request the apiserver refused (403) a client whose rest.Config's
// WrapTransport is Wrap: the tests that run a component with exactly its shipped RBAC fail on
// any of them.
type Refusals struct {
	mu       sync.Mutex
	requests []string
}

// Wrap is a rest.Config WrapTransport that records refusals.
func (f *Refusals) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.requests = append(f.requests, req.Method+" "+req.URL.Path)
			f.mu.Unlock()
		}
		return resp, err
	})
}

// List is every refused request so far, as "METHOD path".
func (f *Refusals) List() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return r(req) }
