package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// ignitionFile is where /init writes the ignition for metalprobe's --ignition.
const ignitionFile = "/run/ignition.json"

// maxIgnitionBytes bounds the ignition download; a real one is a few kilobytes of PEM.
const maxIgnitionBytes = 1 << 20

// fetchIgnition GETs <base>/ignition, retrying with backoff until ctx ends (the boot service
// may be restarting), and checks that it is a complete config. The token in it is never
// printed.
func fetchIgnition(ctx context.Context, client *http.Client, base string, log func(string, ...any)) ([]byte, ignition.Config, error) {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		data, err := getIgnition(ctx, client, base)
		if err == nil {
			cfg, err := ignition.Parse(data)
			// A malformed ignition will not get better by asking again.
			return data, cfg, err
		}
		log("fetching the ignition, attempt %d: %v", attempt, err)
		select {
		case <-ctx.Done():
			return nil, ignition.Config{}, fmt.Errorf("fetching the ignition: %w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 15*time.Second)
	}
}

func getIgnition(ctx context.Context, client *http.Client, base string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+ignition.IgnitionPath, nil)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, redactErr(err, base)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("boot service answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxIgnitionBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the ignition: %w", err)
	}
	if len(data) > maxIgnitionBytes {
		return nil, fmt.Errorf("the ignition is larger than %d bytes", maxIgnitionBytes)
	}
	return data, nil
}

// writeIgnition saves the ignition for metalprobe, readable by root only: it holds the token.
func writeIgnition(data []byte) error {
	if err := os.WriteFile(ignitionFile, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", ignitionFile, err)
	}
	return nil
}

// registryDialTimeout bounds the early reachability check.
const registryDialTimeout = 3 * time.Second

// checkRegistry opens (and closes) a TCP connection to the registry, so that a registry that
// cannot be reached is reported at once, not after metalprobe's own retries. Only the
// connection is tried: metalprobe checks the certificate.
func checkRegistry(ctx context.Context, registryURL string) error {
	u, err := url.Parse(registryURL)
	if err != nil {
		return fmt.Errorf("parsing the registry URL: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	dialer := net.Dialer{Timeout: registryDialTimeout}
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return err
	}
	return conn.Close()
}
