package main

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testIgnition = `{"registryURL": "https://10.0.2.101", "token": "s3cr3t", "systemUUID": "7e0a5b1c-1d2e-4f30-8a41-5b6c7d8e9f00", "mode": "discovery"}`

func TestFetchIgnitionRetriesUntilServed(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ignition/b00t1d" {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) == 1 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(testIgnition))
	}))
	defer srv.Close()
	var logged []string
	data, cfg, err := fetchIgnition(context.Background(), srv.Client(), srv.URL+"/ignition/b00t1d", func(f string, a ...any) {
		logged = append(logged, f)
	})
	require.NoError(t, err)
	assert.Equal(t, testIgnition, string(data))
	assert.Equal(t, "https://10.0.2.101", cfg.RegistryURL)
	assert.Len(t, logged, 1)
}

func TestFetchIgnitionRefusesAnIncompleteOne(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"registryURL": "https://r", "mode": "wipe", "wipePolicy": "zero", "systemUUID": "7e0a5b1c-1d2e-4f30-8a41-5b6c7d8e9f00"}`))
	}))
	defer srv.Close()
	_, _, err := fetchIgnition(context.Background(), srv.Client(), srv.URL+"/ignition/b00t1d", func(string, ...any) {})
	require.ErrorContains(t, err, "token is required")
	assert.NotContains(t, err.Error(), "tok3n")
}

// A machine whose UUID is not its identity (none, a placeholder, shared) boots with an ignition
// that names no UUID: the token is what the probe needs.
func TestFetchIgnitionNeedsNoUUID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"registryURL": "https://r", "token": "s3cr3t", "server": "smc-1-2", "mode": "discovery"}`))
	}))
	defer srv.Close()
	_, cfg, err := fetchIgnition(context.Background(), srv.Client(), srv.URL+"/ignition/b00t1d", func(string, ...any) {})
	require.NoError(t, err)
	assert.Equal(t, "smc-1-2", cfg.Server)
	assert.Empty(t, cfg.SystemUUID)
}

func TestFetchIgnitionGivesUpAtItsDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := fetchIgnition(ctx, http.DefaultClient, "http://127.0.0.1:1/ignition/b00t1d", func(string, ...any) {})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// The boot service serves a boot's ignition once: a refusal is final, not retried until the
// deadline.
func TestFetchIgnitionStopsAtARefusal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "Forbidden", http.StatusForbidden)
	}))
	defer srv.Close()
	_, _, err := fetchIgnition(context.Background(), srv.Client(), srv.URL+"/ignition/b00t1d", func(string, ...any) {})
	require.ErrorIs(t, err, errRefused)
	assert.Equal(t, int32(1), calls.Load())
}

// A network boot's ignition names the boot URL, where progress goes.
func TestFetchIgnitionCarriesTheBootURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"registryURL": "https://r", "token": "s3cr3t", "mode": "discovery", "bootURL": "http://10.0.0.1:8080/boot/tok3n"}`))
	}))
	defer srv.Close()
	_, cfg, err := fetchIgnition(context.Background(), srv.Client(), srv.URL+"/ignition/b00t1d", func(string, ...any) {})
	require.NoError(t, err)
	assert.Equal(t, "http://10.0.0.1:8080/boot/tok3n", cfg.BootURL)
}

func TestCheckRegistry(t *testing.T) {
	registry := httptest.NewTLSServer(http.NotFoundHandler())
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: registry.Certificate().Raw}))
	assert.NoError(t, checkRegistry(context.Background(), registry.URL, ca), "reachable, trusted")

	err := checkRegistry(context.Background(), registry.URL, "")
	require.Error(t, err, "a certificate the probe does not trust is reported")
	assert.Contains(t, err.Error(), "certificate")

	addr := registry.Listener.Addr().String()
	registry.Close()
	err = checkRegistry(context.Background(), "https://"+addr, ca)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "refused"), err)
}
