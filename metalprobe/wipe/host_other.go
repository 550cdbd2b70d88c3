//go:build !(linux && (amd64 || arm64))

package wipe

import (
	"context"
	"os"
	"runtime"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// hostErase: the device-level erases are Linux ioctls (x86-64 and arm64 encodings).
func hostErase(context.Context, string, metalv1alpha1.StorageDevice) (string, error) {
	return "", unsupported("not implemented on %s/%s", runtime.GOOS, runtime.GOARCH)
}

// dropCache can only sync here.
func dropCache(f *os.File) error { return f.Sync() }
