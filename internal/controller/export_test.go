package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ByIndex is byIndex, for the suite's check that it reads what the cache's List does.
func ByIndex[T client.Object](ctx context.Context, c cache.Cache, obj T, list client.ObjectList, items func() []T, field, value string) ([]T, error) {
	return byIndex(ctx, indexedReader{Cache: c}, obj, list, items, field, value)
}

// ItemPointers is itemPointers, for the same.
func ItemPointers[T any](items []T) []*T { return itemPointers(items) }

// PatchStatus is patchStatus, for the suite's check of what the apiserver answers.
var PatchStatus = patchStatus
