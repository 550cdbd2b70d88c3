package controller_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// A status write is answered with the object's metadata only, and the object written keeps its
// status and takes the new version; the API has the change and the inventory it did not touch.
func TestPatchStatusIsAnsweredWithMetadataOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var mu sync.Mutex
	var answers []string // the Content-Type of each PATCH's answer
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodPatch {
				mu.Lock()
				answers = append(answers, resp.Header.Get("Content-Type"))
				mu.Unlock()
			}
			return resp, err
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)

	// No BMC reference: its reconciler writes its status too, so each write here retries a
	// conflict on a fresh read.
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "status-write-answer"}}
	require.NoError(t, k8s.Create(ctx, server))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), server) })
	total := resource.MustParse("64Gi")
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), server); err != nil {
			return err
		}
		server.Status.Inventory = &m.Inventory{Source: "Probe", TotalStorage: &total,
			Storage: []m.StorageDevice{{Name: "sda", Size: &total, Model: "a model only people read"}}}
		return k8s.Status().Update(ctx, server)
	}))

	var written, before *m.Server
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var read m.Server
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), &read); err != nil {
			return err
		}
		read.Status.Inventory = nil // as a compact copy: what it lacks, a merge patch does not touch
		before, written = read.DeepCopy(), read.DeepCopy()
		written.Status.Manufacturer = "Ironfleet"
		return status.Patch(ctx, c, written, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}))

	mu.Lock()
	require.NotEmpty(t, answers)
	// A custom resource has no protobuf encoding: an answer in protobuf is its metadata alone.
	answer := answers[len(answers)-1]
	assert.True(t, strings.Contains(answer, "as=PartialObjectMetadata") || strings.HasPrefix(answer, "application/vnd.kubernetes.protobuf"),
		"the apiserver answered with the metadata only, not the Server (Content-Type %q)", answer)
	mu.Unlock()
	assert.NotEmpty(t, written.ResourceVersion)
	assert.NotEqual(t, before.ResourceVersion, written.ResourceVersion, "the object takes the written version")
	assert.Equal(t, "Ironfleet", written.Status.Manufacturer, "the object keeps the status it was written with")
	assert.Nil(t, written.Status.Inventory)

	var now m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(server), &now))
	assert.Equal(t, "Ironfleet", now.Status.Manufacturer)
	require.NotNil(t, now.Status.Inventory)
	require.Len(t, now.Status.Inventory.Storage, 1)
	assert.Equal(t, "a model only people read", now.Status.Inventory.Storage[0].Model, "what the patch did not name stays")

	// The optimistic lock still holds: a write from a stale read is refused.
	stale := before.DeepCopy()
	stale.Status.Model = "stale"
	err = status.Patch(ctx, c, stale, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	assert.True(t, apierrors.IsConflict(err), "a stale write conflicts: %v", err)
}
