//go:build tools

// Package tools pins the Kubernetes binaries built from the module proxy (prebuilt archives
// cannot be downloaded here): the control plane envtest and the lab run (kube-apiserver,
// kubectl), and the rest of the real single-node cluster of test/node (kubelet,
// kube-controller-manager, kube-scheduler, kube-proxy).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
