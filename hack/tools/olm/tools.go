//go:build tools

// Package tools pins OLM and its registry, which the node tests install Ironfleet with (the
// Makefile builds them into the tools cache): opm builds and serves the file-based catalog, olm
// and catalog are OLM's two operators, cpb copies a bundle in OLM's unpack Job, and
// grpc_health_probe is what OLM's catalog pods are probed with. Their own module: OLM pins its
// Kubernetes libraries, which differ from Ironfleet's and the control plane's.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
