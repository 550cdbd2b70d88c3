//go:build tools

// Package tools pins helm, which renders OLM's chart (deploy/chart of the pinned OLM module)
// into its release manifests for the install tests, as OLM's own release does. Its own module:
// helm pins Kubernetes libraries of its own.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
