package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ironfleet/ironfleet/internal/certs"
)

// pair is a certificate and its key, PEM, and the files they are written to.
type pair struct {
	cert, key         []byte
	certFile, keyFile string
}

// pki is the node's: one CA for every serving and client certificate, and the service
// accounts' signing key.
type pki struct {
	ca        *certs.CA
	caFile    string
	apiserver pair // serving: the node's address, the kubernetes Service's, its names
	kubelet   pair // serving: the node's address and name
	admin     pair // client: system:masters (this process, kubectl, and every component)
	proxy     pair // client: the apiserver to aggregated APIs (OLM's packageserver)
	saKeyFile string
}

const certValidity = 7 * 24 * time.Hour

func writePKI(dir string, ip netip.Addr) (*pki, error) {
	dir = filepath.Join(dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("ironfleet test node CA", certValidity)
	if err != nil {
		return nil, err
	}
	p := &pki{ca: ca, caFile: filepath.Join(dir, "ca.crt"), saKeyFile: filepath.Join(dir, "sa.key")}
	if err := os.WriteFile(p.caFile, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	serviceIP := netip.MustParsePrefix(serviceCIDR).Addr().Next() // the kubernetes Service
	issue := func(into *pair, name string, make func() ([]byte, []byte, error)) error {
		cert, key, err := make()
		if err != nil {
			return fmt.Errorf("%s certificate: %w", name, err)
		}
		*into = pair{cert: cert, key: key, certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key")}
		if err := os.WriteFile(into.certFile, cert, 0o644); err != nil {
			return err
		}
		return os.WriteFile(into.keyFile, key, 0o600)
	}
	if err := issue(&p.apiserver, "apiserver", func() ([]byte, []byte, error) {
		return ca.Issue("kube-apiserver", []string{ip.String(), serviceIP.String(), "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, certValidity)
	}); err != nil {
		return nil, err
	}
	if err := issue(&p.kubelet, "kubelet", func() ([]byte, []byte, error) {
		return ca.Issue(Name, []string{ip.String(), Name}, certValidity)
	}); err != nil {
		return nil, err
	}
	if err := issue(&p.admin, "admin", func() ([]byte, []byte, error) {
		return ca.IssueClient("ironfleet-admin", []string{"system:masters"}, certValidity)
	}); err != nil {
		return nil, err
	}
	if err := issue(&p.proxy, "front-proxy-client", func() ([]byte, []byte, error) {
		return ca.IssueClient("front-proxy-client", nil, certValidity)
	}); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saKeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// writeKubeconfig writes a kubeconfig for a client certificate, reaching the apiserver at the
// node's address.
func (n *Node) writeKubeconfig(name string, user pair) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["node"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://%s:%d", n.ip, apiPort), CertificateAuthority: n.pki.caFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: user.certFile, ClientKey: user.keyFile}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: name}
	cfg.CurrentContext = "node"
	path := filepath.Join(n.dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
