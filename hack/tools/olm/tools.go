//go:build tools

// Package tools pins OLM and its registry, which the install tests install Ironfleet with (the
// Makefile builds them into the tools cache): opm builds and serves the file-based catalog; olm
// and catalog are OLM's two operators, package-server its packages API, cpb what copies a
// bundle in OLM's unpack Job; grpc_health_probe is what OLM probes its catalog pods with. Their
// own module: OLM pins its Kubernetes libraries, which differ from Ironfleet's and the control
// plane's.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/package-server"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
