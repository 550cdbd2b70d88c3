package vm_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/test/vm"
)

// probeRegistry stands for the operator's registry and boot service on a VM network: it
// takes the probe's reports (POST /v1/reports with the boot's bearer token) and its progress
// (POST <boot URL>/progress), over plain HTTP on the bridge.
type probeRegistry struct {
	url, bootURL, token string

	mu       sync.Mutex
	reports  []receivedReport
	refused  []string
	stages   []ignition.Progress
	holdNext chan struct{} // set by HoldNextReport: the next report's answer waits for it to close
}

// receivedReport is one report and when it came.
type receivedReport struct {
	report.Report
	At time.Time
}

// startProbeRegistry serves a registry inside n's namespace, on the bridge's address.
func startProbeRegistry(t *testing.T, n *vm.Network) *probeRegistry {
	t.Helper()
	ln, err := n.ListenTCP(net.JoinHostPort(n.BridgeIP().String(), "0"))
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	r := &probeRegistry{url: base, bootURL: base + "/boot/b00t-t0ken", token: "pr0be-t0ken"}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		r.release()
		_ = srv.Close()
	})
	return r
}

func (r *probeRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == http.MethodPost && req.URL.Path == strings.TrimPrefix(r.bootURL, r.url)+ignition.ProgressPath:
		var p ignition.Progress
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, ignition.MaxProgressBytes)).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.stages = append(r.stages, p)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case req.Method == http.MethodPost && req.URL.Path == "/v1/reports":
		if got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); !ok || got != r.token {
			r.refuse("a report without the boot's bearer token")
			http.Error(w, "wrong token", http.StatusForbidden)
			return
		}
		var rep report.Report
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&rep); err != nil {
			r.refuse("an undecodable report: " + err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.reports = append(r.reports, receivedReport{Report: rep, At: time.Now()})
		hold := r.holdNext
		r.holdNext = nil
		r.mu.Unlock()
		if hold != nil {
			select { // the probe powers off once answered: this keeps it running meanwhile
			case <-hold:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, req)
	}
}

// HoldNextReport keeps the answer to the next report until release: the probe that sent it
// waits for it, so its VM stays on.
func (r *probeRegistry) HoldNextReport() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdNext = make(chan struct{})
}

// release answers a held report, if any.
func (r *probeRegistry) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holdNext != nil {
		close(r.holdNext)
		r.holdNext = nil
	}
}

func (r *probeRegistry) refuse(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = append(r.refused, why)
}

// Reports are the reports received so far, oldest first.
func (r *probeRegistry) Reports() []receivedReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedReport(nil), r.reports...)
}

// Refused are the reports turned away; a test expects none.
func (r *probeRegistry) Refused() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.refused...)
}

// Stages are the progress reports /init sent, for failure messages.
func (r *probeRegistry) Stages() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.stages {
		out = append(out, string(p.Stage)+" "+p.Message)
	}
	return strings.Join(out, "; ")
}

// probeBootISO writes a boot's ISO, as the boot service serves it to a BMC's virtual media, to
// dir/name: the probe's template ISO (make probe-image) with an embed carrying a discovery
// ignition for def's machine that reports to reg, and a static address on the network for
// def's first NIC (the probe does not wait for DHCP).
func probeBootISO(t *testing.T, dir, name string, def vm.Definition, n *vm.Network, reg *probeRegistry) string {
	t.Helper()
	require.NotEmpty(t, def.NICs, "the probe needs a NIC to report over")
	tmpl, err := bootmedia.LoadTemplate(filepath.Dir(probeISO()))
	require.NoError(t, err)
	addr := n.BridgeIP().Next().Next() // the bridge is the subnet's first address; no DHCP here hands out this one
	require.True(t, n.Subnet().Contains(addr))
	ign, err := ignition.Render(ignition.Config{
		RegistryURL: reg.url, Token: reg.token, SystemUUID: def.SMBIOS.UUID, Mode: ignition.ModeDiscovery,
		Network: &metalv1alpha1.ProbeNetwork{
			InterfaceMAC: def.NICs[0].MAC,
			Address:      netip.PrefixFrom(addr, n.Subnet().Bits()).String(),
		},
	})
	require.NoError(t, err)
	embed, err := tmpl.Embed(ign, reg.bootURL)
	require.NoError(t, err)
	in, err := tmpl.Open(embed)
	require.NoError(t, err)
	defer in.Close()
	path := filepath.Join(dir, name)
	out, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, errors.Join(err, out.Close()))
	return path
}

// waitForReport polls reg until a report received after since comes, and returns it.
func waitForReport(t *testing.T, reg *probeRegistry, since time.Time, within time.Duration) receivedReport {
	t.Helper()
	var got receivedReport
	if !assert.Eventually(t, func() bool {
		for _, r := range reg.Reports() {
			if r.At.After(since) {
				got = r
				return true
			}
		}
		return false
	}, within, 100*time.Millisecond) {
		t.Fatalf("no probe report within %s; /init's stages: %s", within, reg.Stages())
	}
	require.Empty(t, reg.Refused(), "the registry refused a report")
	return got
}
