package controller_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/internal/controller/cached"
)

// TestIndexedReadsMatchTheCachesList: the claims controller reads the cache's field indexes
// directly (controller.byIndex, by controller-runtime's own key names), to spare a copy of the
// fleet per bind. For a cluster-scoped kind and a namespaced one, it finds exactly what the
// cache's List finds: were controller-runtime to name its index keys otherwise, this fails
// instead of claims silently finding no server.
func TestIndexedReadsMatchTheCachesList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	require.NoError(t, c.IndexField(ctx, &corev1.Namespace{}, "test-every", func(client.Object) []string { return []string{"yes"} }))
	require.NoError(t, c.IndexField(ctx, &corev1.ConfigMap{}, "test-name", func(o client.Object) []string { return []string{o.GetName()} }))
	// The same name in two namespaces (the operator has no use for ConfigMaps).
	const cmName = "indexed-read-check"
	for _, ns := range []string{"default", "kube-system"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}}
		require.NoError(t, k8s.Create(ctx, cm))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), cm) })
	}
	go func() { _ = c.Start(ctx) }()
	require.True(t, c.WaitForCacheSync(ctx))

	names := func(objs []client.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
		slices.Sort(out)
		return out
	}

	var nsList corev1.NamespaceList
	require.NoError(t, c.List(ctx, &nsList, client.MatchingFields{"test-every": "yes"}))
	var nsRead corev1.NamespaceList
	ns, err := cached.ByIndex(ctx, cached.IndexedReader{Cache: c}, &corev1.Namespace{}, &nsRead, func() []*corev1.Namespace { return cached.ItemPointers(nsRead.Items) }, "test-every", "yes")
	require.NoError(t, err)
	require.NotEmpty(t, nsList.Items)
	want, got := []client.Object{}, []client.Object{}
	for i := range nsList.Items {
		want = append(want, &nsList.Items[i])
	}
	for _, o := range ns {
		got = append(got, o)
	}
	assert.Equal(t, names(want), names(got), "a cluster-scoped kind")

	var cmList corev1.ConfigMapList
	require.NoError(t, c.List(ctx, &cmList, client.MatchingFields{"test-name": cmName}))
	var cmRead corev1.ConfigMapList
	cms, err := cached.ByIndex(ctx, cached.IndexedReader{Cache: c}, &corev1.ConfigMap{}, &cmRead, func() []*corev1.ConfigMap { return cached.ItemPointers(cmRead.Items) }, "test-name", cmName)
	require.NoError(t, err)
	require.Len(t, cmList.Items, 2, "the check's ConfigMap in each of its namespaces")
	want, got = want[:0], got[:0]
	for i := range cmList.Items {
		want = append(want, &cmList.Items[i])
	}
	for _, o := range cms {
		got = append(got, o)
	}
	assert.Equal(t, names(want), names(got), "a namespaced kind, across namespaces")
}
