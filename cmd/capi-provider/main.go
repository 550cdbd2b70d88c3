// Command capi-provider is Ironfleet's Cluster API infrastructure provider
// (infrastructure-ironfleet): flags only; the reconcilers are internal/capi. It runs beside
// Cluster API's core controllers and Ironfleet's operator, in the cluster that holds the
// Servers (docs/capi.md).
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ironfleet/ironfleet/internal/capi"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "capi-provider:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts := capi.DefaultOptions()
	zapOpts := zap.Options{}
	fs := flag.NewFlagSet("capi-provider", flag.ContinueOnError)
	capi.BindFlags(fs, &opts)
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return capi.Run(ctrl.SetupSignalHandler(), cfg, opts)
}
