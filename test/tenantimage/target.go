package tenantimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CopyDisk writes the disk.raw of the build in dir at the start of the disk (a block device
// or a disk-image file) at dst, as installing the image would, and syncs it. The rest of dst
// is left as it is; a file shorter than the image grows to its size.
func CopyDisk(dir, dst string) error {
	src, err := os.Open(filepath.Join(dir, DiskFile))
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, src)
	if err == nil {
		err = out.Sync()
	}
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("writing the tenant image onto %s: %w", dst, err)
	}
	return nil
}

// ReportServer receives /init's reports: an HTTP server that takes a POSTed Report (JSON) on
// any path, answers 204, and hands it over on Reports.
type ReportServer struct {
	srv     *http.Server
	reports chan Report
	done    chan struct{}
	once    sync.Once
}

// ServeReports serves reports on ln (a Network.ListenTCP listener on the VMs' bridge, say)
// until Close.
func ServeReports(ln net.Listener) *ReportServer {
	s := &ReportServer{reports: make(chan Report, 16), done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

func (s *ReportServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a report", http.StatusMethodNotAllowed)
		return
	}
	var rep Report
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 256<<20)).Decode(&rep); err != nil {
		http.Error(w, "not a report: "+err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case s.reports <- rep:
		w.WriteHeader(http.StatusNoContent)
	case <-s.done:
		http.Error(w, "closed", http.StatusServiceUnavailable)
	case <-r.Context().Done():
	}
}

// Reports delivers each report received, in order.
func (s *ReportServer) Reports() <-chan Report { return s.reports }

// Close stops the server (and closes its listener).
func (s *ReportServer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.srv.Close()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	})
	return err
}
