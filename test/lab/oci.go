package lab

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ironfleet/ironfleet/internal/certs"
	"github.com/ironfleet/ironfleet/metalprobe/install"
)

// OCIPort is where the lab's OCI registry listens on the VMs' bridge.
const OCIPort = 5443

// ociRegistry is go-containerregistry's in-process registry (pkg/registry, blobs in memory),
// the one OCI registry the lab runs: the VMs' probes pull from it over HTTPS on their bridge,
// with a certificate from the lab's image CA (the manager's --image-ca-file, which reaches the
// probe in its install), and the lab pushes to it over plain HTTP on the host's loopback — the
// same handler, so the same store.
type ociRegistry struct {
	vmHost  string // bridge:port, as the VMs reach it
	pushTo  string // loopback host:port
	servers []*http.Server
}

// startOCIRegistry serves the registry on the VMs' bridge (TLS) and on loopback (for pushes),
// and writes the image CA to caPath.
func (l *Lab) startOCIRegistry(caPath string) (*ociRegistry, error) {
	ca, err := certs.NewCA("ironfleet lab image CA", 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	bridge := l.vms.network.BridgeIP().String()
	certPEM, keyPEM, err := ca.Issue("ironfleet lab OCI registry", []string{bridge}, 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(caPath, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r := &ociRegistry{vmHost: net.JoinHostPort(bridge, fmt.Sprint(OCIPort))}
	vmLn, err := l.vms.network.ListenTCP(r.vmHost)
	if err != nil {
		return nil, err
	}
	loLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		_ = vmLn.Close()
		return nil, err
	}
	r.pushTo = loLn.Addr().String()
	tlsSrv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}}
	plain := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = tlsSrv.ServeTLS(vmLn, "", "") }()
	go func() { _ = plain.Serve(loLn) }()
	r.servers = []*http.Server{tlsSrv, plain}
	return r, nil
}

func (r *ociRegistry) close() {
	for _, s := range r.servers {
		_ = s.Close()
	}
}

// imageCAFile is where the lab writes the CA the VMs' OCI registry's certificate is issued by.
func imageCAFile(dir string) string { return filepath.Join(dir, "images-ca.pem") }

// PushImageToVMs pushes data, a disk image (compressed or not, as mediaType says), as a
// one-layer OCI artifact to the lab's registry as repo:tag, and returns the oci:// reference
// the VMs pull it by and the layer's digest (what a claim's imageChecksum may name).
func (l *Lab) PushImageToVMs(repo, tag string, data []byte, mediaType string) (ref, layerDigest string, err error) {
	if l.vms == nil || l.vms.oci == nil {
		return "", "", errors.New("the lab runs no VMs, so no OCI registry")
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.MediaType(install.MediaTypeConfig))
	layer := static.NewLayer(data, types.MediaType(mediaType))
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.MediaType(mediaType)})
	if err != nil {
		return "", "", err
	}
	dst, err := name.ParseReference(l.vms.oci.pushTo+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return "", "", err
	}
	if err := remote.Write(dst, img); err != nil {
		return "", "", fmt.Errorf("pushing %s: %w", dst, err)
	}
	d, err := layer.Digest()
	if err != nil {
		return "", "", err
	}
	return "oci://" + l.vms.oci.vmHost + "/" + repo + ":" + tag, d.String(), nil
}
