// Command manager is the Ironfleet operator: flags only; the wiring is internal/manager.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ironfleet/ironfleet/internal/manager"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts := manager.DefaultOptions()
	zapOpts := zap.Options{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	manager.BindFlags(fs, &opts)
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	// Configuration errors stop the manager here, before it touches the cluster.
	prepared, err := manager.Prepare(opts)
	if err != nil {
		return err
	}
	// The flag's default gives way to a GOGC the deployment set; a --gc-percent given wins.
	gcFlag := false
	fs.Visit(func(f *flag.Flag) { gcFlag = gcFlag || f.Name == "gc-percent" })
	if _, gogc := os.LookupEnv("GOGC"); gcFlag || !gogc {
		debug.SetGCPercent(opts.GCPercent)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return prepared.Run(ctrl.SetupSignalHandler(), cfg)
}
