package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/test/testenv"
)

// pauseRef is the pause image make test-images builds, here also a pod's only image: it is the
// one every node has.
func pauseRef(t *testing.T, root string) string {
	data, err := os.ReadFile(filepath.Join(root, "bin", "images", "images.json"))
	require.NoError(t, err, "make test-images builds the pause image (make test does it first)")
	var written map[string]struct{ Ref string }
	require.NoError(t, json.Unmarshal(data, &written))
	require.NotEmpty(t, written["pause"].Ref, "make test-images builds the pause image (make test does it first)")
	return written["pause"].Ref
}

// TestANodeRunsPodsOfImportedImagesOnly starts a real node, runs a pod of an imported image on
// it, sees a pod of an image it lacks fail with the pull recorded (never sent), and leaves
// nothing behind: no processes, mounts, cgroups, directory or network namespace.
func TestANodeRunsPodsOfImportedImagesOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("a node needs root; make test runs as root")
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	opts, err := OptionsFromEnv(filepath.Join(root, "bin", "images"), pauseRef(t, root))
	require.NoError(t, err)
	opts.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := Start(ctx, opts)
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()
	c, err := client.New(n.Config, client.Options{})
	require.NoError(t, err)

	pod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullNever}},
				AutomountServiceAccountToken: new(bool)}}
	}
	require.NoError(t, c.Create(ctx, pod("imported", opts.PauseRef)))
	missing := pod("missing", "ghcr.io/ironfleet/not-imported:v0")
	missing.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	require.NoError(t, c.Create(ctx, missing))

	require.NoError(t, poll(ctx, 3*time.Minute, func() (bool, error) {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "imported"}, &p); err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	}), "the pod of an imported image runs, with an address from the node's bridge%s", n.logTails("kubelet", "containerd"))
	require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
		return len(n.PullAttempts()) > 0, nil
	}), "the image the node lacks was asked of the trap")
	for _, got := range n.PullAttempts() {
		assert.Contains(t, got, "not-imported", "only the missing image was asked for")
	}

	// The kubernetes Service answers on the node (kube-proxy's rules in the node's namespace).
	var svc corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &svc))
	conn, err := n.Dial(ctx, "tcp", svc.Spec.ClusterIP+":443")
	require.NoError(t, err, "the kubernetes Service's ClusterIP leads to the apiserver")
	_ = conn.Close()

	name := n.Network().Name()
	dir := n.dir
	require.NoError(t, n.Stop())
	stopped = true
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the node's directory is gone")
	_, err = os.Stat(filepath.Join("/run/netns", name))
	assert.True(t, os.IsNotExist(err), "the node's network namespace is gone")
	hs, err := allHierarchies()
	require.NoError(t, err)
	for _, h := range hs {
		_, err := os.Stat(filepath.Join(h.path, cgroupName()))
		assert.True(t, os.IsNotExist(err), "the node's cgroup is gone from %s", h.path)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), dir, "nothing stays mounted under the node's directory")
}

// ctr's import line gives the image's name and whole digest (a digest ending in "d" or "e" lost
// them to a trim of "...done", and containerd then found no image by that digest).
func TestImportReadsTheWholeDigest(t *testing.T) {
	line := "unpacking ghcr.io/ironfleet/ironfleet-bundle:v0.1.1 (sha256:7fb24585bdbf0c77b5fe7e3e287bcbb82c1ccd142089689c9d310df309dc2f1d)...done"
	m := unpacked.FindStringSubmatch(line)
	if assert.NotNil(t, m) {
		assert.Equal(t, "ghcr.io/ironfleet/ironfleet-bundle:v0.1.1", m[1])
		assert.Equal(t, "sha256:7fb24585bdbf0c77b5fe7e3e287bcbb82c1ccd142089689c9d310df309dc2f1d", m[2])
	}
	assert.Nil(t, unpacked.FindStringSubmatch("unpacking"), "not an import line")
}
