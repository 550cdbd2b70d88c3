// Command bmcsim serves simulated Redfish BMCs (test/bmcsim) for the lab and for manual
// testing against real clients: one BMC, N BMCs on consecutive ports, or a static mockup.
//
//	bmcsim --listen 127.0.0.1:8443 --tls --username admin --password ... --systems 2 --profile dell
//	bmcsim --count 100 --listen 127.0.0.1:9000 --password ...   # ports 9000-9099
//	bmcsim --static ../shared/redfish-mockups/public-rackmount1
//
// It prints one line per BMC with its URL, then serves until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// passwordEnv lets the password stay out of the process list.
const passwordEnv = "BMCSIM_PASSWORD"

// config is the parsed command line.
type config struct {
	listenHost string
	firstPort  int // 0: every BMC on a random port
	tls        bool
	username   string
	password   string
	systems    int
	profile    bmcsim.Profile
	quirks     *bmcsim.Quirks
	count      int
	static     string
	powerOn    bool
	caDir      string
	// updateDuration is how long a firmware update's task runs (0: the simulator's default).
	updateDuration time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (2 for bad flags, 1 when the
// BMCs cannot start) and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bmcsim: %v\nRun 'bmcsim --help' for usage.\n", err)
		return 2
	}
	bmcs, err := startAll(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bmcsim: %v\n", err)
		return 1
	}
	defer func() {
		for _, b := range bmcs {
			_ = b.Close()
		}
	}()
	for _, b := range bmcs {
		fmt.Fprintln(stdout, b.URL())
	}
	<-ctx.Done()
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bmcsim", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports errors in one line; only --help prints the usage
	listen := fs.String("listen", "127.0.0.1:8443", "address of the first BMC; with --count, the next ones use the following ports (port 0: random ports)")
	tls := fs.Bool("tls", false, "serve HTTPS with a fresh self-signed certificate per BMC")
	username := fs.String("username", "admin", "the BMC account's user name")
	password := fs.String("password", "", "the BMC account's password (or set "+passwordEnv+")")
	systems := fs.Int("systems", 1, "computer systems behind each BMC")
	profile := fs.String("profile", string(bmcsim.ProfileGeneric), fmt.Sprintf("vendor profile, one of %v", bmcsim.Profiles()))
	quirks := fs.String("quirks", "", "comma-separated quirks replacing the profile's, e.g. NoSystemUUID,PowerStateLag=2s; known: "+fmt.Sprint(bmcsim.QuirkNames()))
	count := fs.Int("count", 1, "number of BMCs to serve")
	static := fs.String("static", "", "serve this DMTF mockup directory (it is /redfish/v1) instead of simulated systems")
	powerOn := fs.Bool("power-on", false, "start every system powered on")
	updateDuration := fs.Duration("update-duration", bmcsim.DefaultUpdateDuration, "how long a firmware update's task runs (SimpleUpdate, multipart push)")
	caDir := fs.String("ca-dir", "", "with --tls, write each BMC's certificate to DIR/<port>.pem for clients to trust")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage: bmcsim [flags]\n\nServes simulated Redfish BMCs and prints one URL per BMC.\n\nFlags:")
			fs.PrintDefaults()
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: bmcsim takes flags only", fs.Arg(0))
	}

	cfg := config{tls: *tls, username: *username, password: *password, systems: *systems, count: *count,
		static: *static, powerOn: *powerOn, caDir: *caDir, profile: bmcsim.Profile(strings.ToLower(*profile)), updateDuration: *updateDuration}
	host, port, err := net.SplitHostPort(*listen)
	if err != nil {
		return config{}, fmt.Errorf("--listen %q: want HOST:PORT: %w", *listen, err)
	}
	cfg.listenHost = host
	if cfg.firstPort, err = strconv.Atoi(port); err != nil || cfg.firstPort < 0 || cfg.firstPort > 65535 {
		return config{}, fmt.Errorf("--listen %q: port must be a number from 0 to 65535", *listen)
	}
	switch {
	case cfg.count < 1:
		return config{}, fmt.Errorf("--count must be at least 1, got %d", cfg.count)
	case cfg.firstPort != 0 && cfg.firstPort+cfg.count-1 > 65535:
		return config{}, fmt.Errorf("--count %d from port %d runs past port 65535", cfg.count, cfg.firstPort)
	case cfg.systems < 1 || cfg.systems > 256:
		return config{}, fmt.Errorf("--systems must be from 1 to 256, got %d", cfg.systems)
	case !slices.Contains(bmcsim.Profiles(), cfg.profile):
		return config{}, fmt.Errorf("--profile %q is unknown; use one of %v", *profile, bmcsim.Profiles())
	case cfg.caDir != "" && !cfg.tls:
		return config{}, errors.New("--ca-dir needs --tls")
	case cfg.updateDuration < 0:
		return config{}, fmt.Errorf("--update-duration must not be negative, got %s", cfg.updateDuration)
	}
	if *quirks != "" {
		q, err := bmcsim.ParseQuirks(*quirks)
		if err != nil {
			return config{}, fmt.Errorf("--quirks: %w", err)
		}
		cfg.quirks = &q
	}
	if cfg.password == "" {
		cfg.password = os.Getenv(passwordEnv)
	}
	if cfg.password == "" && cfg.static == "" {
		return config{}, fmt.Errorf("--password is required (or set %s)", passwordEnv)
	}
	return cfg, nil
}

// startAll starts every BMC, closing the started ones if one fails.
func startAll(cfg config) ([]*bmcsim.BMC, error) {
	bmcs := make([]*bmcsim.BMC, 0, cfg.count)
	fail := func(err error) ([]*bmcsim.BMC, error) {
		for _, b := range bmcs {
			_ = b.Close()
		}
		return nil, err
	}
	for i := range cfg.count {
		port := 0
		if cfg.firstPort != 0 {
			port = cfg.firstPort + i
		}
		addr := net.JoinHostPort(cfg.listenHost, strconv.Itoa(port))
		var b *bmcsim.BMC
		var err error
		if cfg.static != "" {
			b, err = bmcsim.StartStaticAt(cfg.static, addr, cfg.tls)
		} else {
			b, err = bmcsim.Start(options(cfg, i, addr))
		}
		if err != nil {
			return fail(fmt.Errorf("BMC %d: %w", i+1, err))
		}
		bmcs = append(bmcs, b)
		if cfg.caDir != "" {
			_, port, _ := net.SplitHostPort(b.Host())
			if err := os.WriteFile(filepath.Join(cfg.caDir, port+".pem"), b.CACertPEM(), 0o644); err != nil {
				return fail(fmt.Errorf("write certificate: %w", err))
			}
		}
	}
	return bmcs, nil
}

// options describes the i-th BMC; its systems are numbered across the whole fleet so every
// system has its own UUID, serial number and MACs.
func options(cfg config, i int, addr string) bmcsim.Options {
	opts := bmcsim.Options{
		Addr: addr, TLS: cfg.tls, Username: cfg.username, Password: cfg.password,
		Profile: cfg.profile, Quirks: cfg.quirks, SerialNumber: fmt.Sprintf("BMCSIM%05d", i+1),
		UpdateDuration: cfg.updateDuration,
	}
	for j := range cfg.systems {
		spec := bmcsim.DefaultSystem(i*cfg.systems + j)
		if cfg.powerOn {
			spec.PowerState = "On"
		}
		opts.Systems = append(opts.Systems, spec)
	}
	return opts
}
