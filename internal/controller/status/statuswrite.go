package status

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Patch writes obj's status with patch, computed from obj as Status().Patch would, and
// asks the apiserver to answer with the object's metadata only (PartialObjectMetadata), not the
// whole object: a Server's answer is its whole inventory, about 16 KiB of JSON that the
// apiserver encoded and the manager decoded at every status write, to be thrown away. obj keeps
// the status it was written with and takes the new resourceVersion and generation; unlike the
// whole answer, it does not take what others wrote meanwhile (none, under an optimistic lock),
// which a reconciler learns from its watch, as always.
func Patch(ctx context.Context, c client.Client, obj client.Object, patch client.Patch) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	meta.SetGroupVersionKind(gvk)
	if err := c.Status().Patch(ctx, meta, patch, &client.SubResourcePatchOptions{SubResourceBody: obj}); err != nil {
		return err
	}
	obj.SetResourceVersion(meta.ResourceVersion)
	obj.SetGeneration(meta.Generation)
	return nil
}
