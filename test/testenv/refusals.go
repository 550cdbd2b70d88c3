package testenv

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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

// Grant is what a test user may do: ClusterRules everywhere, Rules in Namespace.
type Grant struct {
	User         string
	ClusterRules []rbacv1.PolicyRule
	Namespace    string
	Rules        []rbacv1.PolicyRule
}

// UserWith makes g.User, bound to a ClusterRole of g.ClusterRules (and a Role of g.Rules in
// g.Namespace, when it has any), and returns its config, each refused request recorded in
// refused: the tests that run a component with exactly its shipped RBAC.
func (e *Env) UserWith(ctx context.Context, g Grant, refused *Refusals) (*rest.Config, error) {
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: g.User}, Rules: g.ClusterRules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: g.User},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.User},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: g.User}}},
	}
	if len(g.Rules) > 0 {
		objs = append(objs,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.User}, Rules: g.Rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.User},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: g.User},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: g.User}}})
	}
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("granting %s its permissions: %w", g.User, err)
		}
	}
	u, err := e.Environment.AddUser(envtest.User{Name: g.User}, nil)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.WrapTransport = refused.Wrap
	return cfg, nil
}
