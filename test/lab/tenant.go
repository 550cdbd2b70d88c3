package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ironfleet/ironfleet/test/tenantimage"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// Ports on the VMs' bridge: the tenant image's files, and where installed tenant OSes report.
const (
	TenantImagePort  = 8081
	TenantReportPort = 8099
)

// Tenants is the tenant test image (make tenant-image) served to the VMs, and what the OSes
// installed from it report: an installed OS reads its claim's ignition from the config drive
// and, when the ignition asks (contract.TestConfig), posts it back from a static address.
type Tenants struct {
	// Dir is the image's build directory; BaseURL serves its files to the VMs.
	Dir, BaseURL string
	// ReportURL is where installed OSes report.
	ReportURL string

	l       *Lab
	reports chan contract.Report
	mu      sync.Mutex
	host    byte            // the last static address handed out on the VMs' subnet
	reply   *contract.Reply // the answer to the next report, when a test set one
}

// ServeTenants serves the tenant image's directory (tenantimage.Dir) to the VMs and listens for
// their OSes' reports, until the lab stops. Once per lab.
func (l *Lab) ServeTenants() (*Tenants, error) {
	if l.vms == nil {
		return nil, errors.New("the lab runs no VMs")
	}
	dir, err := tenantimage.Dir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, tenantimage.DiskGzFile)); err != nil {
		return nil, fmt.Errorf("the tenant image is not built (run make tenant-image): %w", err)
	}
	base, err := l.ServeToVMs(dir, TenantImagePort)
	if err != nil {
		return nil, err
	}
	network := l.vms.network
	addr := net.JoinHostPort(network.BridgeIP().String(), fmt.Sprint(TenantReportPort))
	ln, err := network.ListenTCP(addr)
	if err != nil {
		return nil, err
	}
	t := &Tenants{Dir: dir, BaseURL: base, ReportURL: "http://" + addr + "/report", l: l,
		reports: make(chan contract.Report, 16), host: firstStaticHost - 1}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(t.receive)}
	go func() { _ = srv.Serve(ln) }()
	l.vms.servers = append(l.vms.servers, srv)
	return t, nil
}

func (t *Tenants) receive(w http.ResponseWriter, req *http.Request) {
	var rep contract.Report
	if err := json.NewDecoder(io.LimitReader(req.Body, 4<<20)).Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case t.reports <- rep:
	default:
		http.Error(w, "nobody is reading reports", http.StatusServiceUnavailable)
		return
	}
	t.mu.Lock()
	reply := t.reply
	t.reply = nil
	t.mu.Unlock()
	if reply == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// ReplyToNext answers the next report with reply: more for that OS to do (contract.Reply).
func (t *Tenants) ReplyToNext(reply contract.Reply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reply = &reply
}

// URL is the address of one of the image's files, as the VMs reach it.
func (t *Tenants) URL(file string) string { return t.BaseURL + "/" + file }

// Checksum is sha256:<hex> of one of the image's files, as its SHA256SUMS lists it.
func (t *Tenants) Checksum(file string) (string, error) {
	f, err := os.Open(filepath.Join(t.Dir, tenantimage.SumsFile))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == file {
			return "sha256:" + fields[0], nil
		}
	}
	return "", fmt.Errorf("%s in %s does not list %s", tenantimage.SumsFile, t.Dir, file)
}

// Read is one of the image's files.
func (t *Tenants) Read(file string) ([]byte, error) { return os.ReadFile(filepath.Join(t.Dir, file)) }

// firstStaticHost is the first host number of the static addresses UserData hands out: above
// the boot service's DHCP range (BootServiceConfig: .100–.200).
const firstStaticHost = 210

// UserData is an ignition that asks the installed OS to report from a static address of its
// own on the VMs' subnet (never DHCP), with extra fields and trailing bytes of the caller's.
func (t *Tenants) UserData(extra map[string]any, trailer []byte) ([]byte, error) {
	t.mu.Lock()
	if t.host == 254 {
		t.mu.Unlock()
		return nil, errors.New("the VMs' subnet has no static address left for a tenant")
	}
	t.host++
	host := t.host
	t.mu.Unlock()
	network := t.l.vms.network
	a := network.Subnet().Addr().As4()
	a[3] = host
	prefix := network.Subnet().Bits()
	return contract.UserData(contract.TestConfig{Address: fmt.Sprintf("%s/%d", net.IP(a[:]), prefix), ReportURL: t.ReportURL}, extra, trailer)
}

// Next waits for the next report of an installed OS.
func (t *Tenants) Next(ctx context.Context, timeout time.Duration) (contract.Report, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case rep := <-t.reports:
		return rep, nil
	case <-timer.C:
		return contract.Report{}, fmt.Errorf("no installed OS reported within %v", timeout)
	case <-ctx.Done():
		return contract.Report{}, ctx.Err()
	}
}
