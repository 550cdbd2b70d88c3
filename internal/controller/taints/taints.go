// Package taints sets and removes the taints Ironfleet puts on Servers (its own
// metal.ironfleet.dev/ keys), leaving everyone else's as they are.
package taints

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Set gives server the taint (key and effect; value as given, time as given), replacing one of
// the same key and effect with another value; changed says whether it wrote.
func Set(ctx context.Context, c client.Client, server *metalv1alpha1.Server, taint metalv1alpha1.Taint) (changed bool, err error) {
	i := slices.IndexFunc(server.Spec.Taints, func(t metalv1alpha1.Taint) bool { return t.Key == taint.Key && t.Effect == taint.Effect })
	if i >= 0 && server.Spec.Taints[i].Value == taint.Value {
		return false, nil
	}
	list := slices.Clone(server.Spec.Taints)
	if i >= 0 {
		list[i] = taint
	} else {
		list = append(list, taint)
	}
	return true, patch(ctx, c, server, list)
}

// Remove removes the taints with key; changed says whether there was one.
func Remove(ctx context.Context, c client.Client, server *metalv1alpha1.Server, key string) (changed bool, err error) {
	list := slices.DeleteFunc(slices.Clone(server.Spec.Taints), func(t metalv1alpha1.Taint) bool { return t.Key == key })
	if len(list) == len(server.Spec.Taints) {
		return false, nil
	}
	return true, patch(ctx, c, server, list)
}

// patch writes the taints, only if the server's spec is still the one they were worked out
// from (its generation): a person's edit meanwhile is not overwritten (the caller tries again).
func patch(ctx context.Context, c client.Client, server *metalv1alpha1.Server, list []metalv1alpha1.Taint) error {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/generation", "value": server.Generation},
		{"op": "add", "path": "/spec/taints", "value": list},
	}
	if len(list) == 0 {
		ops[1] = map[string]any{"op": "remove", "path": "/spec/taints"}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, server, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("setting the taints of server %s (tried again): %w", server.Name, err)
	}
	return nil
}
