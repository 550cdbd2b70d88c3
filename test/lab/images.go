package lab

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// ImageServer serves OS images over HTTP on the host's loopback, for claims on the simulated
// hosts: their in-process probes install them onto their disk files, as a server's probe
// installs a claim's image onto its disk.
type ImageServer struct {
	ln     net.Listener
	srv    *http.Server
	mu     sync.Mutex
	images map[string][]byte
}

// SimImageName is the image every lab starts with: SimImage, gzip-compressed.
const SimImageName = "sim-os.raw.gz"

// StartImageServer serves images at http://127.0.0.1:<port>/images/<name>.
func StartImageServer() (*ImageServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("image server: %w", err)
	}
	s := &ImageServer{ln: ln, images: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		data, ok := s.images[r.PathValue("name")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.PathValue("name"), time.Time{}, bytes.NewReader(data))
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	sim, err := gzipped(SimImage())
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.Add(SimImageName, sim)
	return s, nil
}

// Add serves data as name and returns its URL and checksum (sha256:<hex>).
func (s *ImageServer) Add(name string, data []byte) (url, checksum string) {
	s.mu.Lock()
	s.images[name] = data
	s.mu.Unlock()
	return s.URL(name), Checksum(data)
}

// URL is where name is served (whether or not it is).
func (s *ImageServer) URL(name string) string {
	return fmt.Sprintf("http://%s/images/%s", s.ln.Addr(), name)
}

// SimImage is the URL and checksum of the lab's default image.
func (s *ImageServer) SimImage() (url, checksum string) {
	s.mu.Lock()
	data := s.images[SimImageName]
	s.mu.Unlock()
	return s.URL(SimImageName), Checksum(data)
}

// Close stops serving.
func (s *ImageServer) Close() error { return s.srv.Close() }

// Checksum is the sha256:<hex> of data, as a claim's imageChecksum spells it.
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SimImageBytes is the size of SimImage: with a config drive after it, it fits a simulated
// host's DiskBytes.
const SimImageBytes = 1 << 20

// SimImage is a tiny partitioned raw disk: an MBR whose one Linux partition spans sectors
// 64–2047 and holds a recognisable pattern. It boots nothing (the simulated hosts run no OS),
// but it is installed, verified and given a config drive exactly as a real image is.
func SimImage() []byte {
	img := make([]byte, SimImageBytes)
	mbr := img[:512]
	entry := mbr[446:462]
	entry[0] = 0x80 // bootable
	entry[4] = 0x83 // Linux
	binary.LittleEndian.PutUint32(entry[8:], 64)
	binary.LittleEndian.PutUint32(entry[12:], SimImageBytes/512-64)
	binary.LittleEndian.PutUint32(mbr[440:], 0x1f1eef17) // disk signature
	mbr[510], mbr[511] = 0x55, 0xaa
	for i := 64 * 512; i < len(img); i += 512 {
		copy(img[i:], "ironfleet lab image sector ")
	}
	return img
}

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // no name, no time: the same bytes every time
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
