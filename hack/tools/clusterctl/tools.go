//go:build tools

// Package tools pins clusterctl, Cluster API's command line, at the Cluster API version the
// provider is built against: the tests render templates/cluster-template.yaml with it
// (`clusterctl generate cluster`), and docs/capi.md installs the provider with it. Its own
// module: clusterctl pins Kubernetes libraries of its own.
package tools

import (
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
)
