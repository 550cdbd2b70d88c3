// Package testenv starts the real control plane (kube-apiserver + etcd, via controller-runtime's
// envtest) with Ironfleet's CRDs installed, for tests and the lab. The binaries are the ones
// `make envtest` builds from source into the tools cache (ToolsDir).
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Env is a running control plane.
type Env struct {
	Environment *envtest.Environment
	Config      *rest.Config
	Client      client.Client
	Scheme      *runtime.Scheme
	// Assets is the directory holding kube-apiserver, etcd and kubectl.
	Assets string
}

// Scheme returns a scheme with the Kubernetes built-in kinds and Ironfleet's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := metalv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Options tune the control plane's processes.
type Options struct {
	// GOGC, when positive, is the garbage-collection target kube-apiserver and etcd run with
	// (Go's default is 100). Both spend much of their CPU collecting garbage under a write
	// load; a higher target trades memory for that CPU. The benchmark sets it and says so.
	GOGC int
	// MemoryLimitMiB, when positive, is each process's soft memory limit (GOMEMLIMIT): near it
	// the collector runs more often whatever GOGC says, so a high GOGC cannot exhaust the
	// machine at ten thousand servers.
	MemoryLimitMiB int
	// ClusterAPI installs Cluster API's core CRDs (from the pinned sigs.k8s.io/cluster-api
	// module) and Ironfleet's infrastructure provider's (config/capi/crd/bases) too, and adds
	// both to the scheme.
	ClusterAPI bool
	// CRDPaths are more CRD directories or files to install.
	CRDPaths []string
}

// environment is the variables the control plane's processes get on top of this process's.
func (o Options) environment() map[string]string {
	env := map[string]string{}
	if o.GOGC > 0 {
		env["GOGC"] = strconv.Itoa(o.GOGC)
	}
	if o.MemoryLimitMiB > 0 {
		env["GOMEMLIMIT"] = strconv.Itoa(o.MemoryLimitMiB) + "MiB"
	}
	return env
}

// Start starts kube-apiserver and etcd with the CRDs from config/crd/bases installed.
func Start() (*Env, error) { return StartWith(Options{}) }

// StartWith is Start with the control plane's processes tuned by opts.
func StartWith(opts Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	crds := append([]string{filepath.Join(root, "config", "crd", "bases")}, opts.CRDPaths...)
	if opts.ClusterAPI {
		core, err := ModuleDir("sigs.k8s.io/cluster-api")
		if err != nil {
			return nil, err
		}
		crds = append(crds, filepath.Join(root, "config", "capi", "crd", "bases"), filepath.Join(core, "core", "config", "crd", "bases"))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
	}
	// envtest starts its processes with this process's environment, and offers no other way to
	// give them one. This process's own runtime read GOGC and GOMEMLIMIT when it started, so it
	// is unaffected; the variables are put back once the control plane runs.
	for name, value := range opts.environment() {
		old, had := os.LookupEnv(name)
		_ = os.Setenv(name, value)
		defer func() {
			if had {
				_ = os.Setenv(name, old)
			} else {
				_ = os.Unsetenv(name)
			}
		}()
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the envtest control plane from %s: %w", assets, err)
	}
	scheme := Scheme()
	if opts.ClusterAPI {
		utilruntime.Must(clusterv1.AddToScheme(scheme))
		utilruntime.Must(infrav1.AddToScheme(scheme))
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return &Env{Environment: env, Config: cfg, Client: c, Scheme: scheme, Assets: assets}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.Environment.Stop() }

// Kubeconfig returns a kubeconfig for an administrator of the control plane.
func (e *Env) Kubeconfig() ([]byte, error) {
	user, err := e.Environment.AddUser(envtest.User{Name: "ironfleet-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding an admin user: %w", err)
	}
	return user.KubeConfig()
}

// ToolsDir is where the Makefile builds its tools, by version, outside any clone:
// $IRONFLEET_TOOLS_DIR (the Makefile exports it), else the user's cache directory's
// ironfleet/tools (the Makefile's default TOOLS_DIR).
func ToolsDir() string {
	if dir := os.Getenv("IRONFLEET_TOOLS_DIR"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "ironfleet", "tools")
}

// Assets finds the control-plane binaries: $KUBEBUILDER_ASSETS if set, else the newest
// envtest/k8s-* directory of the tools cache (ToolsDir).
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, checkAssets(dir)
	}
	dirs, _ := filepath.Glob(filepath.Join(ToolsDir(), "envtest", "k8s-*"))
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if checkAssets(dirs[i]) == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no envtest control plane found in %s: run `make envtest` (or `make test`) to build kube-apiserver, etcd and kubectl", filepath.Join(ToolsDir(), "envtest"))
}

func checkAssets(dir string) error {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("envtest assets in %s are incomplete (%s missing): run `make envtest`", dir, bin)
		}
	}
	return nil
}

// ModuleDir is where the Go module cache holds the version of module that go.mod pins (its
// CRDs, for one): `go list -m`, run in the repository, which downloads nothing a build did not.
func ModuleDir(module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("finding module %s in the module cache (go list -m): %v %s", module, err, stderr)
	}
	return dir, nil
}

// RepoRoot walks up from the working directory to the directory holding the project's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the Ironfleet repository root (a directory with PROJECT and go.mod) above the working directory")
		}
		dir = parent
	}
}
