package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/install"
	"github.com/ironfleet/ironfleet/metalprobe/post"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// Boot state updates during an install: at most one every bootStateInterval, each request
// bounded by bootStateTimeout. Tests shorten the interval.
var (
	bootStateInterval = 5 * time.Second
	bootStateTimeout  = 5 * time.Second
)

// bootStateInstalling is the state posted while the image is written.
const bootStateInstalling = "Installing"

// provision installs the ignition's image into rep.Install, logging the steps, and says whether
// the install failed. refuse, when set, is why this host must not be written to at all.
// registry is the registry's client (nil with --dry-run), from which the claim's user data is
// fetched before anything is written.
func provision(ctx context.Context, stderr io.Writer, f flags, cfg config, refuse string, rep *report.Report, states *bootStates, registry *http.Client) bool {
	spec := *cfg.Install
	if refuse != "" {
		rep.Install = &metalv1alpha1.InstallReport{Image: spec.Image, ImageChecksum: spec.ImageChecksum,
			Reason: metalv1alpha1.InstallReasonNoMatchingDisk, Message: "not installed: " + refuse}
		_, _ = fmt.Fprintf(stderr, "metalprobe: not installing: %s\n", refuse)
		return true
	}
	userData, err := fetchUserData(ctx, f, cfg, rep.SystemUUID, registry)
	if err != nil {
		rep.Install = &metalv1alpha1.InstallReport{Image: spec.Image, ImageChecksum: spec.ImageChecksum,
			Reason: metalv1alpha1.InstallReasonConfigDriveFailed, Message: "not installed: " + err.Error()}
		_, _ = fmt.Fprintf(stderr, "metalprobe: not installing: %v\n", err)
		return true
	}
	client, err := imageClient(f.insecure, cfg.caPEM, []byte(spec.CABundle))
	if err != nil {
		rep.Install = &metalv1alpha1.InstallReport{Image: spec.Image, ImageChecksum: spec.ImageChecksum,
			Reason: metalv1alpha1.InstallReasonImageUnreachable, Message: err.Error()}
		_, _ = fmt.Fprintf(stderr, "metalprobe: not installing: %v\n", err)
		return true
	}
	opts := install.Options{
		Root:       f.root,
		Install:    spec,
		UserData:   userData,
		Disks:      rep.Inventory.Storage,
		WipePolicy: cfg.WipePolicy,
		HTTPClient: client,
		Log:        prefixWriter{w: stderr, prefix: "metalprobe: "},
		Progress: func(written, total int64) {
			msg := progressMessage(written, total)
			_, _ = fmt.Fprintf(stderr, "metalprobe: installing: %s\n", msg)
			states.update(msg)
		},
	}
	if isLive(f.root) {
		// Never under --root: a device-native erase must not be aimed at a fixture's files.
		opts.Eraser = wipe.HostEraser{}
	}
	_, _ = fmt.Fprintf(stderr, "metalprobe: installing the image (a failed install is wiped with policy %s)\n", cfg.WipePolicy)
	states.update("starting the install")
	rep.Install = install.Run(ctx, opts) // logs its outcome
	return !rep.Install.Succeeded
}

// fetchUserData fetches the claim's user data from the registry, over TLS with the boot's token,
// and checks it against the ignition's digest; nil when the install has none. It is never in the
// ignition itself, which travels in the clear (ignition.Install). The error says why, without
// the data.
func fetchUserData(ctx context.Context, f flags, cfg config, systemUUID string, registry *http.Client) ([]byte, error) {
	want := cfg.Install.UserDataSHA256
	if want == "" {
		return nil, nil
	}
	if registry == nil {
		return nil, errors.New("the claim's user data comes from the registry, and --dry-run sends nothing to it")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	data, err := post.UserData(ctx, registry, cfg.RegistryURL, cfg.Token, systemUUID, sendBackoff)
	if err != nil {
		return nil, fmt.Errorf("the claim's user data could not be fetched: %w", err)
	}
	if got := ignition.UserDataDigest(data); got != want {
		return nil, fmt.Errorf("the registry's user data (%d bytes, %s) is not the claim's this install was rendered with (%s): its ignition Secret changed since", len(data), got, want)
	}
	return data, nil
}

// progressMessage says how far the write is, in MiB.
func progressMessage(written, total int64) string {
	if total > 0 {
		return fmt.Sprintf("%d MiB of %d MiB written", written>>20, total>>20)
	}
	return fmt.Sprintf("%d MiB written", written>>20)
}

// imageClient fetches images: the system's CAs, the registry's own (images are often served by
// the registry's host) and the install's CA bundle (--image-ca-file); no overall timeout (the
// install bounds each request itself).
func imageClient(insecure bool, registryCA, imageCA []byte) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if len(registryCA) > 0 && !pool.AppendCertsFromPEM(registryCA) {
		return nil, fmt.Errorf("registry CA: no PEM certificate found")
	}
	if len(imageCA) > 0 && !pool.AppendCertsFromPEM(imageCA) {
		return nil, fmt.Errorf("install.caBundle: no PEM certificate found")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, InsecureSkipVerify: insecure} // insecure only on explicit request
	return &http.Client{Transport: transport}, nil
}

// prefixWriter prefixes each write (one log line) with prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// bootStates posts install progress to the registry in the background: the newest message, at
// most every bootStateInterval, best effort (a failure is logged). A nil *bootStates does
// nothing.
type bootStates struct {
	post   func(ctx context.Context, msg string) error
	stderr io.Writer

	mu      sync.Mutex
	pending string
	has     bool

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

func startBootStates(client *http.Client, registryURL, token, systemUUID string, stderr io.Writer) *bootStates {
	return newBootStates(func(ctx context.Context, msg string) error {
		return post.BootState(ctx, client, registryURL, token, systemUUID, bootStateInstalling, msg)
	}, stderr)
}

func newBootStates(post func(ctx context.Context, msg string) error, stderr io.Writer) *bootStates {
	b := &bootStates{
		post:   post,
		stderr: stderr,
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go b.loop()
	return b
}

// update replaces the message to post next.
func (b *bootStates) update(msg string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.pending, b.has = msg, true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// stop posts the last message if it was not posted yet, and ends the loop.
func (b *bootStates) stop() {
	if b == nil {
		return
	}
	close(b.quit)
	<-b.done
}

func (b *bootStates) loop() {
	defer close(b.done)
	for {
		select {
		case <-b.wake:
		case <-b.quit:
			b.flush()
			return
		}
		b.flush()
		t := time.NewTimer(bootStateInterval)
		select {
		case <-t.C:
		case <-b.quit:
			t.Stop()
			b.flush()
			return
		}
	}
}

// flush posts the pending message, if any.
func (b *bootStates) flush() {
	b.mu.Lock()
	msg, has := b.pending, b.has
	b.has = false
	b.mu.Unlock()
	if !has {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootStateTimeout)
	defer cancel()
	if err := b.post(ctx, msg); err != nil {
		_, _ = fmt.Fprintf(b.stderr, "metalprobe: warning: %v\n", err)
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
