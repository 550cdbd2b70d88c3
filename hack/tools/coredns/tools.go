//go:build tools

// Package tools pins CoreDNS, the test node's cluster DNS (test/node): OLM, like most
// operators, reaches Services by name. Its own module: CoreDNS pins Kubernetes libraries of
// its own.
package tools

import (
	_ "github.com/coredns/coredns"
)
