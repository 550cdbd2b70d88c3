package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/syncbuf"
)

func TestBadFlagsAreExplained(t *testing.T) {
	t.Setenv(passwordEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--password", "x", "--profile", "cray"}, `--profile "cray" is unknown`},
		{[]string{"--password", "x", "--count", "0"}, "--count must be at least 1"},
		{[]string{"--password", "x", "--systems", "0"}, "--systems must be from 1 to 256"},
		{[]string{"--password", "x", "--listen", "localhost"}, "--listen \"localhost\": want HOST:PORT"},
		{[]string{"--password", "x", "--listen", "127.0.0.1:http"}, "port must be a number"},
		{[]string{"--password", "x", "--listen", "127.0.0.1:65535", "--count", "2"}, "runs past port 65535"},
		{[]string{"--password", "x", "--quirks", "NoSuchQuirk"}, `unknown quirk "NoSuchQuirk"`},
		{[]string{"--password", "x", "--ca-dir", "/tmp"}, "--ca-dir needs --tls"},
		{[]string{"--password", "x", "extra"}, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{}, "--password is required (or set BMCSIM_PASSWORD)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr syncbuf.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	var stdout, stderr syncbuf.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"--help"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "Usage: bmcsim")
	assert.Contains(t, stderr.String(), "-profile")
}

func TestStartFailuresExitOne(t *testing.T) {
	var stdout, stderr syncbuf.Buffer
	code := run(context.Background(), []string{"--static", filepath.Join(t.TempDir(), "missing"), "--listen", "127.0.0.1:0"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "not a Redfish mockup")

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	code = run(context.Background(), []string{"--password", "x", "--listen", busy.Addr().String()}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "address already in use")
}

// serve runs the command until the test ends and returns the URLs it printed.
func serve(t *testing.T, n int, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, in := io.Pipe()
	var stderr syncbuf.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, args, in, &stderr)
		in.Close()
	}()
	t.Cleanup(func() {
		cancel()
		_, _ = io.Copy(io.Discard, out)
		select {
		case c := <-code:
			assert.Equal(t, 0, c, "exit code after interrupt; stderr: %s", stderr.String())
		case <-time.After(10 * time.Second):
			t.Error("bmcsim did not stop after the interrupt")
		}
	})
	lines := bufio.NewScanner(out)
	var urls []string
	for len(urls) < n && lines.Scan() {
		urls = append(urls, lines.Text())
	}
	require.Len(t, urls, n, "stderr: %s", stderr.String())
	return urls
}

func TestServesAFleetOverVerifiedTLS(t *testing.T) {
	caDir := t.TempDir()
	t.Setenv(passwordEnv, "from-env")
	urls := serve(t, 3, "--listen", "127.0.0.1:0", "--tls", "--count", "3", "--systems", "2", "--profile", "dell", "--ca-dir", caDir, "--power-on")

	uuids := map[string]bool{}
	for _, u := range urls {
		require.True(t, strings.HasPrefix(u, "https://127.0.0.1:"), u)
		_, port, err := net.SplitHostPort(strings.TrimPrefix(u, "https://"))
		require.NoError(t, err)
		pem, err := os.ReadFile(filepath.Join(caDir, port+".pem"))
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem))
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

		c, err := gofish.Connect(gofish.ClientConfig{Endpoint: u, Username: "admin", Password: "from-env", HTTPClient: client})
		require.NoError(t, err)
		systems, err := c.Service.Systems()
		require.NoError(t, err)
		require.Len(t, systems, 2)
		for _, s := range systems {
			assert.True(t, strings.HasPrefix(s.ID, "System.Embedded."), s.ID)
			assert.Equal(t, "On", string(s.PowerState))
			assert.False(t, uuids[s.UUID], "systems are distinct across the fleet")
			uuids[s.UUID] = true
		}
		c.Logout()
	}
}

func TestCountUsesConsecutivePorts(t *testing.T) {
	// Pick neighbouring ports below the kernel's ephemeral range, where concurrent tests'
	// random ports and outgoing connections do not land; retry if one is taken anyway.
	for attempt := 0; ; attempt++ {
		port := 20000 + rand.IntN(10000)
		var stdout, stderr syncbuf.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		code := make(chan int, 1)
		go func() {
			code <- run(ctx, []string{"--password", "x", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--count", "2"}, &stdout, &stderr)
		}()
		var lines []string
		require.Eventually(t, func() bool {
			lines = strings.Fields(stdout.String())
			return len(lines) == 2 || stderr.String() != ""
		}, 10*time.Second, 10*time.Millisecond)
		cancel()
		<-code
		if strings.Contains(stderr.String(), "address already in use") && attempt < 10 {
			continue
		}
		require.Empty(t, stderr.String())
		assert.Equal(t, []string{"http://127.0.0.1:" + strconv.Itoa(port), "http://127.0.0.1:" + strconv.Itoa(port+1)}, lines)
		return
	}
}

func TestServesAStaticMockup(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "Systems"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.json"), []byte(`{"@odata.id":"/redfish/v1/","Systems":{"@odata.id":"/redfish/v1/Systems"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Systems", "index.json"), []byte(`{"@odata.id":"/redfish/v1/Systems","Members":[]}`), 0o644))

	urls := serve(t, 1, "--static", dir, "--listen", "127.0.0.1:0")
	resp, err := http.Get(urls[0] + "/redfish/v1/Systems")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"@odata.id":"/redfish/v1/Systems","Members":[]}`, string(body))
}
