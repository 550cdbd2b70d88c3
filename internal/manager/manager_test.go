package manager

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A manager process started with o.Args() runs with exactly o: every option has a flag, and
// Args renders each one so that BindFlags reads it back unchanged.
func TestArgsRoundTripThroughTheFlags(t *testing.T) {
	o := Options{
		MetricsAddr: "127.0.0.1:1", ProbeAddr: "127.0.0.1:2", PprofAddr: "127.0.0.1:3",
		LeaderElect: true, LeaderElectNS: "ns", MACPrefixesFile: "/m.yaml", BMCCAFile: "/ca.pem", ImageCAFile: "/images-ca.pem",
		BMCTimeout: 7 * time.Second, BMCMaxResponseBytes: 12345, BMCMaxSystems: 3, KubeQPS: 123.5, KubeBurst: 456,
		RegistryAddr: "127.0.0.1:4", RegistryURL: "https://r:4", RegistrySecret: "a/b",
		SystemNamespace: "sys", ProbeImage: "img:1", BootOperator: "other-boot-operator", GCPercent: 35,
	}
	o.Discovery.Timeout, o.Discovery.Attempts = 42*time.Second, 5
	o.Discovery.InstallTimeout, o.Discovery.InstallAttempts = 17*time.Minute, 4
	o.Settings.ResyncPeriod, o.Settings.BackoffBase, o.Settings.BackoffMax = 3*time.Minute, 250*time.Millisecond, time.Minute
	o.Settings.DefaultConcurrency = 9
	o.Settings.MaxConcurrentReconciles = map[string]int{"server": 16, "bmc": 8}

	got := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	BindFlags(fs, &got)
	require.NoError(t, fs.Parse(o.Args()))
	assert.Equal(t, o, got)

	// The defaults survive the round trip too (no concurrency map, no pprof).
	def, got := DefaultOptions(), Options{}
	fs = flag.NewFlagSet("manager", flag.ContinueOnError)
	BindFlags(fs, &got)
	require.NoError(t, fs.Parse(def.Args()))
	assert.Equal(t, def, got)
}

// A boot operator name that cannot be a label value stops the manager at start-up, naming
// the flag.
func TestBadBootOperatorIsRefused(t *testing.T) {
	o := DefaultOptions()
	o.BootOperator = "not a label value"
	_, err := Prepare(o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--boot-operator")
}

// A power or firmware timeout that is not positive, or a GC target out of range, stops the manager at start-up, naming the flag.
func TestBadPowerTimeoutsAreRefused(t *testing.T) {
	for flagName, edit := range map[string]func(*Options){
		"--power-confirm-timeout":     func(o *Options) { o.Settings.Power.Confirm = 0 },
		"--graceful-shutdown-timeout": func(o *Options) { o.Settings.Power.GracefulShutdown = -time.Second },
		"--gc-percent":                func(o *Options) { o.GCPercent = 0 },
		"--firmware-task-poll":        func(o *Options) { o.FirmwareTaskPoll = 0 },
		"--firmware-step-timeout":     func(o *Options) { o.FirmwareStepTimeout = -time.Minute },
	} {
		o := DefaultOptions()
		edit(&o)
		_, err := Prepare(o)
		if assert.Error(t, err, flagName) {
			assert.Contains(t, err.Error(), flagName)
		}
	}
}
