// Package cli is metalprobe's command line: collect this host's hardware (and, in wipe mode,
// wipe its disks; in provision mode, install an OS image on one of them) and report to the
// registry. The metalprobe binary and the lab's in-process boots both run it, so the lab
// exercises exactly what a host runs.
package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/collect"
	"github.com/ironfleet/ironfleet/metalprobe/post"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// Version is the probe build, set with
// -ldflags "-X github.com/ironfleet/ironfleet/metalprobe/cli.Version=v1.2.3".
var Version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // collection, delivery, a wipe, an install, or a file that cannot be read
	exitUsage   = 2 // the command line itself is wrong
	// ExitReportedFailure: the wipe or the install failed, and the report saying so was
	// delivered. The operator decides what comes next; running the probe again would repeat the
	// work on a server it may be powering off.
	ExitReportedFailure = 3
)

// sendBackoff is how patiently the report is delivered; tests shorten it.
var sendBackoff = post.DefaultBackoff

// requestTimeout bounds one HTTP request; --timeout bounds the whole run.
const requestTimeout = 30 * time.Second

type flags struct {
	root, registryURL, token, tokenFile, ignition, caFile, lldpctl, mode, wipePolicy string
	dryRun, insecure, version                                                        bool
	timeout                                                                          time.Duration
}

// usageError is a command line that cannot work; run exits 2 for it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// whose names what a report is for, for people: the server the ignition names (the registry
// takes the report for the server its token names) and the UUID this host reads, if any.
func whose(server, uuid string) string {
	switch {
	case server != "" && uuid != "":
		return fmt.Sprintf("server %s (this host reads system UUID %s)", server, uuid)
	case server != "":
		return fmt.Sprintf("server %s (this host reads no system UUID)", server)
	case uuid != "":
		return "system " + uuid
	}
	return "this host (it reads no system UUID)"
}

// Run runs metalprobe with args and returns its exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	// Provision mode posts its progress from a goroutine of its own, which may log.
	stderr = &syncWriter{w: stderr}
	fs := flag.NewFlagSet("metalprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	fs.StringVar(&f.root, "root", "", "read this fixture `dir`ectory instead of the live system")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the report as JSON to stdout instead of sending it")
	fs.StringVar(&f.registryURL, "registry-url", "", "registry base `URL` (reports go to <URL>/v1/reports)")
	fs.StringVar(&f.token, "token", "", "bearer `token` for the registry (prefer --token-file)")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from `file`")
	fs.StringVar(&f.ignition, "ignition", "", "read registryURL, token, mode, wipePolicy, install (and registryCA) from this JSON `file`; flags override it")
	fs.StringVar(&f.mode, "mode", "", "what to do: discovery (report the inventory; the default), wipe (wipe every non-removable disk, then report) or provision (install the ignition's image, then report; needs --ignition)")
	fs.StringVar(&f.wipePolicy, "wipe-policy", "", "with wipe mode: erase (the default: the device's own erase, else zeros, read back), metadata, zero or secure; with provision mode: how the disk is wiped again after a failed install")
	fs.StringVar(&f.caFile, "ca-file", "", "trust only the CA certificates in this PEM `file` for the registry")
	fs.BoolVar(&f.insecure, "insecure-skip-verify", false, "do not verify the registry's certificate (testing only)")
	fs.StringVar(&f.lldpctl, "lldpctl", "", "lldpctl binary `path` (default: lldpctl on PATH; ignored with --root)")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up on collecting and sending after this long (in wipe and provision modes each has this long; the wipe or install itself is not bounded)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), `Usage: metalprobe [--root DIR] [--dry-run] [--registry-url URL] [--token TOKEN | --token-file FILE]
                  [--ignition FILE] [--mode discovery|wipe|provision] [--wipe-policy erase|metadata|zero|secure]
                  [--ca-file PEM] [--insecure-skip-verify] [--lldpctl PATH] [--timeout 2m]

Collects this host's hardware inventory and sends it to the Ironfleet registry. In wipe mode it
first wipes every non-removable disk (<root>/dev/<name>) and adds the result to the report:
this destroys the disks' contents, --dry-run included (it only skips sending).

In provision mode (only from an --ignition with an install section) it writes the install's
image (http(s):// or oci://, verified against its checksum) to the disk its root device hints
choose, adds a config drive with the claim's user data (fetched from the registry's
<URL>/v1/userdata with the token, never in the ignition), and adds the result to the report; progress
goes to the registry's <URL>/v1/bootstate while it writes. This overwrites that disk, --dry-run
included.

`)
		fs.PrintDefaults()
		_, _ = fmt.Fprint(fs.Output(), `
Exit status: 0 done (or --dry-run printed the report), 1 collecting or sending failed, or a file
could not be read (or, with --dry-run, a disk could not be wiped or the install failed), 2 the
command line is wrong, 3 a disk could not be wiped or the install failed and the report saying
so was delivered.
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if f.version {
		_, _ = fmt.Fprintln(stdout, Version)
		return exitOK
	}
	cfg, err := resolve(f, fs.Args())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			_, _ = fmt.Fprintln(stderr, "Run 'metalprobe --help' for usage.")
			return exitUsage
		}
		return exitFailure
	}

	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, f.timeout)
	defer cancel()

	rep, err := collect.Collect(ctx, collect.Options{Root: f.root, LLDPCtl: f.lldpctl, ProbeVersion: Version})
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: collecting: %v\n", err)
		return exitFailure
	}
	var otherSystem string
	if cfg.SystemUUID != "" && rep.SystemUUID != cfg.SystemUUID {
		otherSystem = fmt.Sprintf("ignition is for system %s but this host reports %q", cfg.SystemUUID, rep.SystemUUID)
		rep.Warnings = append(rep.Warnings, "probe: "+otherSystem)
	}
	for _, w := range rep.Warnings {
		_, _ = fmt.Fprintf(stderr, "metalprobe: warning: %s\n", w)
	}

	var client *http.Client
	if !f.dryRun {
		if f.insecure {
			_, _ = fmt.Fprintln(stderr, "metalprobe: warning: not verifying the registry's certificate (--insecure-skip-verify)")
		}
		if client, err = httpClient(cfg.caPEM, f.insecure); err != nil {
			_, _ = fmt.Fprintf(stderr, "metalprobe: %v\n", err)
			return exitFailure
		}
	}

	modeFailed := false // the wipe or the install failed: exit 3 once the report is sent
	if cfg.Mode == ignition.ModeWipe || cfg.Mode == ignition.ModeProvision {
		// Zeroing a large disk or writing a large image takes long: --timeout does not bound
		// the wipe or the install, only a signal does, and sending the report afterwards gets a
		// --timeout of its own.
		if cfg.Mode == ignition.ModeWipe {
			modeFailed = wipeDisks(sigCtx, stderr, f.root, cfg.WipePolicy, cfg.WipeExclusions, otherSystem, rep)
		} else {
			var states *bootStates
			if client != nil {
				states = startBootStates(client, cfg.RegistryURL, cfg.Token, rep.SystemUUID, stderr)
			}
			modeFailed = provision(sigCtx, stderr, f, cfg, otherSystem, rep, states, client)
			states.stop()
		}
		parent := sigCtx
		if sigCtx.Err() != nil {
			// Interrupted: still tell the registry (the disks are not clean), but let a second
			// signal end the probe at once.
			stop()
			parent = context.WithoutCancel(sigCtx)
		}
		cancel()
		ctx, cancel = context.WithTimeout(parent, f.timeout)
		defer cancel()
	}

	if f.dryRun {
		if code := printReport(stdout, stderr, rep); code != exitOK || modeFailed {
			return exitFailure
		}
		return exitOK
	}
	if err := post.Send(ctx, client, cfg.RegistryURL, cfg.Token, rep, sendBackoff); err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: %v\n", err)
		return exitFailure
	}
	_, _ = fmt.Fprintf(stderr, "metalprobe: report for %s delivered to %s\n", whose(cfg.Server, rep.SystemUUID), cfg.RegistryURL)
	if modeFailed {
		return ExitReportedFailure
	}
	return exitOK
}

// progressMinBytes is the smallest wipe whose progress is logged (in 10% steps).
const progressMinBytes = 256 << 20

// wipeDisks wipes the inventory's disks (but those wipe.Skip leaves) into rep.Wipe, logging each result, and
// says whether the wipe failed: a disk not wiped as asked, no disk at all to wipe, or refuse
// (why this host must not be wiped at all; every disk is then reported not wiped, so that the
// operator learns of it). With no disk to wipe (storage could not be read, say) the report
// carries no Wipe at all, only a warning: an empty wipe report must not pass for a clean server.
func wipeDisks(ctx context.Context, stderr io.Writer, root string, policy metalv1alpha1.WipePolicy, exclusions []metalv1alpha1.WipeExclusion, refuse string, rep *report.Report) bool {
	for _, d := range rep.Inventory.Storage {
		if why := wipe.Skip(d, exclusions); why != "" {
			_, _ = fmt.Fprintf(stderr, "metalprobe: not wiping %s: %s\n", d.Name, why)
		}
	}
	if refuse != "" {
		rep.Wipe = &metalv1alpha1.WipeReport{Policy: policy}
		for _, d := range rep.Inventory.Storage {
			if wipe.Skip(d, exclusions) == "" {
				rep.Wipe.Disks = append(rep.Wipe.Disks, metalv1alpha1.DiskWipe{Name: d.Name, SerialNumber: d.SerialNumber,
					Method: wipe.MethodNone, Message: "not wiped: " + refuse})
			}
		}
		_, _ = fmt.Fprintf(stderr, "metalprobe: not wiping any disk: %s\n", refuse)
		return true
	}
	opts := wipe.Options{Root: root, Policy: policy, Progress: progressLogger(stderr), Exclusions: exclusions}
	if isLive(root) {
		// Never under --root: a device-native erase must not be aimed at a fixture's files.
		opts.Eraser = wipe.HostEraser{}
	}
	_, _ = fmt.Fprintf(stderr, "metalprobe: wiping disks (policy %s)\n", policy)
	rep.Wipe = wipe.Wipe(ctx, rep.Inventory.Storage, opts)
	for _, d := range rep.Wipe.Disks {
		status := "wiped"
		if !d.Succeeded {
			status = "FAILED"
		}
		_, _ = fmt.Fprintf(stderr, "metalprobe: %s %s (%s): %s\n", d.Name, status, d.Method, d.Message)
	}
	if len(rep.Wipe.Disks) == 0 {
		rep.Wipe = nil
		const msg = "wipe: no disk to wipe in the inventory; nothing was wiped"
		rep.Warnings = append(rep.Warnings, msg)
		_, _ = fmt.Fprintf(stderr, "metalprobe: warning: %s\n", msg)
		return true
	}
	if failed := wipe.Failed(rep.Wipe); len(failed) > 0 {
		_, _ = fmt.Fprintf(stderr, "metalprobe: %d of %d disks were not wiped\n", len(failed), len(rep.Wipe.Disks))
		return true
	}
	return false
}

// progressLogger logs a long wipe's progress in 10% steps.
func progressLogger(stderr io.Writer) wipe.Progress {
	var disk string
	var next int64
	return func(name string, done, total int64) {
		if total < progressMinBytes {
			return
		}
		if name != disk {
			disk, next = name, 10
		}
		if pct := done * 100 / total; pct >= next {
			_, _ = fmt.Fprintf(stderr, "metalprobe: wiping %s: %d%% of %d bytes\n", name, pct, total)
			next = pct/10*10 + 10
		}
	}
}

// isLive says whether root (--root) is the machine itself rather than a fixture tree.
func isLive(root string) bool {
	return root == "" || filepath.Clean(root) == "/"
}

// config is what the run needs once the ignition file and flags are merged.
type config struct {
	ignition.Config
	caPEM []byte
}

// resolve merges the ignition file with the flags (flags win) and checks that what the run
// needs is there. Command-line mistakes are usageErrors; unreadable files are plain errors.
func resolve(f flags, rest []string) (config, error) {
	if len(rest) > 0 {
		// Not quoted: a stray argument is as likely as not a token pasted in the wrong place.
		return config{}, usageError{fmt.Sprintf("unexpected positional argument (%d given); everything is a flag", len(rest))}
	}
	if f.token != "" && f.tokenFile != "" {
		return config{}, usageError{"--token and --token-file are mutually exclusive"}
	}
	if f.caFile != "" && f.insecure {
		return config{}, usageError{"--ca-file and --insecure-skip-verify are mutually exclusive"}
	}
	if f.timeout <= 0 {
		return config{}, usageError{"--timeout must be positive"}
	}
	switch ignition.Mode(f.mode) {
	case "", ignition.ModeDiscovery, ignition.ModeWipe, ignition.ModeProvision:
	default:
		return config{}, usageError{fmt.Sprintf("--mode %q is not discovery, wipe or provision", f.mode)}
	}
	switch metalv1alpha1.WipePolicy(f.wipePolicy) {
	case "", metalv1alpha1.WipeErase, metalv1alpha1.WipeMetadata, metalv1alpha1.WipeZero, metalv1alpha1.WipeSecure:
	default:
		return config{}, usageError{fmt.Sprintf("--wipe-policy %q is not erase, metadata, zero or secure", f.wipePolicy)}
	}
	var cfg config
	if f.ignition != "" {
		ign, err := ignition.Load(f.ignition)
		if err != nil {
			return config{}, err
		}
		cfg.Config = ign
		if ign.RegistryCA != "" {
			cfg.caPEM = []byte(ign.RegistryCA)
		}
	}
	if f.mode != "" {
		cfg.Mode = ignition.Mode(f.mode)
	}
	if f.wipePolicy != "" {
		cfg.WipePolicy = metalv1alpha1.WipePolicy(f.wipePolicy)
	}
	switch cfg.Mode {
	case ignition.ModeWipe:
		cfg.Install = nil
		if cfg.WipePolicy == "" {
			cfg.WipePolicy = metalv1alpha1.DefaultWipePolicy
		}
		if f.dryRun && isLive(f.root) {
			return config{}, usageError{"wipe mode with --dry-run would still wipe this machine's disks (--dry-run only skips sending the report); use --root with a copy of a fixture tree to try it"}
		}
	case ignition.ModeProvision:
		if cfg.Install == nil {
			return config{}, usageError{"provision mode needs the install section of an ignition (--ignition with mode \"provision\"); the image cannot be given with flags"}
		}
		if err := cfg.Install.Validate(); err != nil {
			return config{}, fmt.Errorf("ignition %s: %w", f.ignition, err)
		}
		if cfg.WipePolicy == "" {
			cfg.WipePolicy = metalv1alpha1.DefaultWipePolicy
		}
		if f.dryRun && isLive(f.root) {
			return config{}, usageError{"provision mode with --dry-run would still overwrite a disk of this machine (--dry-run only skips sending the report); use --root with a copy of a fixture tree to try it"}
		}
	default:
		cfg.Mode = ignition.ModeDiscovery
		cfg.Install = nil
		if f.wipePolicy != "" {
			return config{}, usageError{"--wipe-policy only applies in wipe and provision modes (--mode wipe, or mode \"wipe\" or \"provision\" in --ignition)"}
		}
	}
	if f.registryURL != "" {
		if err := ignition.CheckURL(f.registryURL); err != nil {
			return config{}, usageError{"--registry-url: " + err.Error()}
		}
		cfg.RegistryURL = f.registryURL
	}
	switch {
	case f.token != "":
		cfg.Token = strings.TrimSpace(f.token)
	case f.tokenFile != "":
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return config{}, fmt.Errorf("reading --token-file: %w", err)
		}
		if cfg.Token = strings.TrimSpace(string(data)); cfg.Token == "" {
			return config{}, fmt.Errorf("--token-file %s is empty", f.tokenFile)
		}
	}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return config{}, fmt.Errorf("reading --ca-file: %w", err)
		}
		if _, err := ignition.CertPool(pem); err != nil {
			return config{}, fmt.Errorf("--ca-file %s: %w", f.caFile, err)
		}
		cfg.caPEM = pem
	}
	if f.dryRun {
		return cfg, nil
	}
	if cfg.RegistryURL == "" {
		return config{}, usageError{"--registry-url (or registryURL in --ignition) is required unless --dry-run"}
	}
	if cfg.Token == "" {
		return config{}, usageError{"--token, --token-file (or token in --ignition) is required unless --dry-run"}
	}
	return cfg, nil
}

// httpClient trusts caPEM alone when given (the registry's own CA), else the system roots.
func httpClient(caPEM []byte, insecure bool) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool, err := ignition.CertPool(caPEM)
		if err != nil {
			return nil, fmt.Errorf("registry CA: %w", err)
		}
		tlsConfig.RootCAs = pool
	}
	tlsConfig.InsecureSkipVerify = insecure // only on explicit request (--insecure-skip-verify)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &http.Client{Transport: transport, Timeout: requestTimeout}, nil
}

func printReport(stdout, stderr io.Writer, rep *report.Report) int {
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: encoding report: %v\n", err)
		return exitFailure
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", out); err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: writing report: %v\n", err)
		return exitFailure
	}
	return exitOK
}
