//go:build tools

// Package tools pins the Kubernetes control-plane binaries that envtest and the lab run.
// They are built from the module proxy because prebuilt envtest archives cannot be downloaded.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
