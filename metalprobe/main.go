package main

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
	"strings"
	"syscall"
	"time"

	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/collect"
	"github.com/ironfleet/ironfleet/metalprobe/post"
)

// version is the probe build, set with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // collection, delivery, or a file that cannot be read
	exitUsage   = 2 // the command line itself is wrong
)

// sendBackoff is how patiently the report is delivered; tests shorten it.
var sendBackoff = post.DefaultBackoff

// requestTimeout bounds one HTTP request; --timeout bounds the whole run.
const requestTimeout = 30 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	root, registryURL, token, tokenFile, ignition, caFile, lldpctl string
	dryRun, insecure, version                                      bool
	timeout                                                        time.Duration
}

// usageError is a command line that cannot work; run exits 2 for it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("metalprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	fs.StringVar(&f.root, "root", "", "read this fixture `dir`ectory instead of the live system")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the report as JSON to stdout instead of sending it")
	fs.StringVar(&f.registryURL, "registry-url", "", "registry base `URL` (reports go to <URL>/v1/reports)")
	fs.StringVar(&f.token, "token", "", "bearer `token` for the registry (prefer --token-file)")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from `file`")
	fs.StringVar(&f.ignition, "ignition", "", "read registryURL, token, mode (and registryCA) from this JSON `file`; flags override it")
	fs.StringVar(&f.caFile, "ca-file", "", "trust only the CA certificates in this PEM `file` for the registry")
	fs.BoolVar(&f.insecure, "insecure-skip-verify", false, "do not verify the registry's certificate (testing only)")
	fs.StringVar(&f.lldpctl, "lldpctl", "", "lldpctl binary `path` (default: lldpctl on PATH; ignored with --root)")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up on collecting and sending after this long")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), `Usage: metalprobe [--root DIR] [--dry-run] [--registry-url URL] [--token TOKEN | --token-file FILE]
                  [--ignition FILE] [--ca-file PEM] [--insecure-skip-verify] [--lldpctl PATH] [--timeout 2m]

Collects this host's hardware inventory and sends it to the Ironfleet registry.

`)
		fs.PrintDefaults()
		_, _ = fmt.Fprint(fs.Output(), `
Exit status: 0 done (or --dry-run printed the report), 1 collecting or sending failed or a file
could not be read, 2 the command line is wrong.
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if f.version {
		_, _ = fmt.Fprintln(stdout, version)
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	rep, err := collect.Collect(ctx, collect.Options{Root: f.root, LLDPCtl: f.lldpctl, ProbeVersion: version})
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: collecting: %v\n", err)
		return exitFailure
	}
	if cfg.SystemUUID != "" && rep.SystemUUID != cfg.SystemUUID {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("probe: ignition is for system %s but this host reports %q", cfg.SystemUUID, rep.SystemUUID))
	}
	for _, w := range rep.Warnings {
		_, _ = fmt.Fprintf(stderr, "metalprobe: warning: %s\n", w)
	}

	if f.dryRun {
		return printReport(stdout, stderr, rep)
	}
	if f.insecure {
		_, _ = fmt.Fprintln(stderr, "metalprobe: warning: not verifying the registry's certificate (--insecure-skip-verify)")
	}
	client, err := httpClient(cfg.caPEM, f.insecure)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: %v\n", err)
		return exitFailure
	}
	if err := post.Send(ctx, client, cfg.RegistryURL, cfg.Token, rep, sendBackoff); err != nil {
		_, _ = fmt.Fprintf(stderr, "metalprobe: %v\n", err)
		return exitFailure
	}
	_, _ = fmt.Fprintf(stderr, "metalprobe: report for system %s delivered to %s\n", rep.SystemUUID, cfg.RegistryURL)
	return exitOK
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
	if cfg.Mode == ignition.ModeWipe {
		return config{}, errors.New("ignition asks for wipe mode, which this metalprobe build does not implement")
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
