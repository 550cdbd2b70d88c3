//go:build tools

// Package tools pins operator-sdk, used to generate and validate the OLM bundle.
package tools

import _ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
