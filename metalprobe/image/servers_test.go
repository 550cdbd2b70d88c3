package image

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
)

// fakeBootService serves one boot's ignition at /ignition/<id>, once, with the boot URL
// (http://<bootServiceIP>/boot/<token>) added, and records its progress there, as Ironfleet's
// boot service does.
type fakeBootService struct {
	id, token string
	ignition  []byte
	served    bool

	mu       sync.Mutex
	progress []ignition.Progress
}

func (b *fakeBootService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	base := "/boot/" + b.token
	switch {
	case r.Method == http.MethodGet && r.URL.Path == ignition.IgnitionPathPrefix+b.id:
		b.mu.Lock()
		again := b.served
		b.served = true
		b.mu.Unlock()
		if again {
			http.Error(w, "served already", http.StatusForbidden)
			return
		}
		data, err := ignition.WithBootURL(b.ignition, "http://"+bootServiceIP+base)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	case r.Method == http.MethodPost && r.URL.Path == base+ignition.ProgressPath:
		var p ignition.Progress
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, ignition.MaxProgressBytes)).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := p.Validate(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.progress = append(b.progress, p)
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (b *fakeBootService) stages() []ignition.Progress {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ignition.Progress(nil), b.progress...)
}

// fakeRegistry takes reports at POST /v1/reports with the expected bearer token.
type fakeRegistry struct {
	token string

	mu      sync.Mutex
	reports []*report.Report
	at      []time.Time
	refused []string
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/reports" {
		http.NotFound(w, r)
		return
	}
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || got != f.token {
		f.refuse("a report without the boot's bearer token")
		http.Error(w, "wrong token", http.StatusForbidden)
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	var rep report.Report
	if err := dec.Decode(&rep); err != nil {
		f.refuse("an undecodable report: " + err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reports = append(f.reports, &rep)
	f.at = append(f.at, time.Now())
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeRegistry) refuse(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = append(f.refused, why)
}

// testCA is a CA and a server certificate it signed for one IP address: the address the guest
// reaches the registry at, which httptest's own certificate does not name.
func testCA(t *testing.T, ip net.IP) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metalprobe image test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{ip}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	require.NoError(t, err)
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startTLS starts an httptest server with cert.
func startTLS(t *testing.T, h http.Handler, cert tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	// /init's reachability check connects without a handshake; that is not worth a log line.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
