//go:build tools

// Package tools pins the code generators and manifest tools the Makefile builds into bin/.
// The envtest control plane (kube/, etcd/) and operator-sdk (operator-sdk/) have modules of
// their own because their dependency graphs conflict with each other's.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
