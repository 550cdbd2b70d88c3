package main

import (
	"context"
	"crypto/tls"
	"errors"
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

// fetchIgnition GETs the ignition from url (ignition.KernelArgIgnition's), retrying with
// backoff until ctx ends (the boot service may be restarting), and checks that it is a complete
// config. The boot service serves it once: a refusal (403) is final, as asking again would only
// be refused again. The token in it is never printed.
func fetchIgnition(ctx context.Context, client *http.Client, url string, log func(string, ...any)) ([]byte, ignition.Config, error) {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		data, err := getIgnition(ctx, client, url)
		if err == nil {
			cfg, err := ignition.Parse(data)
			// A malformed ignition will not get better by asking again.
			return data, cfg, err
		}
		if errors.Is(err, errRefused) {
			return nil, ignition.Config{}, fmt.Errorf("fetching the ignition: %w", err)
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

// errRefused: the boot service refused the ignition (served already, or to another host).
var errRefused = errors.New("the boot service refused it (403): it was served already, or this host is not the one the boot is bound to; the boot is ended and the operator boots the server again")

func getIgnition(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusForbidden {
		return nil, errRefused
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("boot service answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, ignition.MaxIgnitionBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the ignition: %w", err)
	}
	if len(data) > ignition.MaxIgnitionBytes {
		return nil, fmt.Errorf("the ignition is larger than %d bytes", ignition.MaxIgnitionBytes)
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

// checkRegistry connects to the registry and, for https, completes a TLS handshake trusting
// the CA the ignition names (the system roots without one), so that a registry that cannot be
// reached, or whose certificate the probe would refuse, is reported at once rather than after
// metalprobe's own retries. The handshake also lets the registry see an ordinary client
// rather than a connection dropped mid-handshake.
func checkRegistry(ctx context.Context, registryURL, registryCA string) error {
	u, err := url.Parse(registryURL)
	if err != nil {
		return fmt.Errorf("parsing the registry URL: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	ctx, cancel := context.WithTimeout(ctx, registryDialTimeout)
	defer cancel()
	addr := net.JoinHostPort(u.Hostname(), port)
	if u.Scheme != "https" {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	conf := &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	if registryCA != "" {
		if conf.RootCAs, err = ignition.CertPool([]byte(registryCA)); err != nil {
			return fmt.Errorf("registryCA: %w", err)
		}
	}
	conn, err := (&tls.Dialer{Config: conf}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
