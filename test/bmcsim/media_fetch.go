package bmcsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// mediaStore is a BMC's fetched images: the directory they go to and the files in use.
type mediaStore struct {
	mu      sync.Mutex
	dir     string // Options.MediaDir, or a temporary directory made on first use
	ownDir  bool   // dir was made by the BMC and is removed by Close
	closed  bool
	maxSize int64
	timeout time.Duration
}

// MediaDir is the directory fetched images go to: Options.MediaDir, or the temporary
// directory the BMC made on its first insert ("" until then). Close removes the files and a
// directory the BMC made.
func (b *BMC) MediaDir() string {
	if b.media == nil {
		return ""
	}
	b.media.mu.Lock()
	defer b.media.mu.Unlock()
	return b.media.dir
}

func newMediaStore(opts Options) *mediaStore {
	st := &mediaStore{dir: opts.MediaDir, maxSize: opts.MediaMaxBytes, timeout: opts.MediaFetchTimeout}
	if st.maxSize <= 0 {
		st.maxSize = DefaultMediaMaxBytes
	}
	if st.timeout <= 0 {
		st.timeout = DefaultMediaFetchTimeout
	}
	return st
}

// directory is where a fetch writes, made on first use.
func (st *mediaStore) directory() (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return "", errors.New("the BMC is closed")
	}
	if st.dir == "" {
		dir, err := os.MkdirTemp("", "bmcsim-media-")
		if err != nil {
			return "", err
		}
		st.dir, st.ownDir = dir, true
		return dir, nil
	}
	return st.dir, os.MkdirAll(st.dir, 0o755)
}

// close removes the given files and the directory the store made.
func (st *mediaStore) close(files []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	for _, f := range files {
		_ = os.Remove(f)
	}
	if st.ownDir && st.dir != "" {
		_ = os.RemoveAll(st.dir)
	}
}

// fetchError is a fetch failure as the BMC answers it.
type fetchError struct {
	status             int
	messageID, message string
}

func (e *fetchError) Error() string { return e.message }

// mediaTransport fetches images as a BMC does: no proxies (the image server is on the
// BMC's network), certificates not verified (VerifyCertificate defaults to false).
var mediaTransport = &http.Transport{
	Proxy:                 nil,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	TLSClientConfig:       &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // as BMCs with VerifyCertificate false
	TLSHandshakeTimeout:   10 * time.Second,
	ResponseHeaderTimeout: 30 * time.Second,
	MaxIdleConnsPerHost:   2,
	IdleConnTimeout:       30 * time.Second,
}

// fetch downloads image into a new file of the store, synchronously (as iDRAC and
// sushy-tools do), bounded in size and time; on failure nothing is left behind.
func (st *mediaStore) fetch(ctx context.Context, image, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	unreachable := func(err error) error {
		return &fetchError{status: http.StatusBadRequest, messageID: msgCouldNotConnect,
			message: fmt.Sprintf("The image at %s could not be fetched: %v.", image, errors.Unwrap(err))}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return "", unreachable(err)
	}
	req.Header.Set("User-Agent", "bmcsim-virtual-media")
	resp, err := (&http.Client{Transport: mediaTransport}).Do(req)
	if err != nil {
		return "", unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		id := msgResourceAtURIMissing
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			id = msgResourceAtURIUnauth
		}
		return "", &fetchError{status: http.StatusBadRequest, messageID: id,
			message: fmt.Sprintf("The image at %s could not be fetched: HTTP %s.", image, resp.Status)}
	}
	if resp.ContentLength > st.maxSize {
		return "", tooLarge(image, st.maxSize)
	}
	dir, err := st.directory()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, sanitize(name)+"-*.iso")
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, st.maxSize+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		_ = os.Remove(f.Name())
		return "", unreachable(fmt.Errorf("reading: %w", err))
	case n > st.maxSize:
		_ = os.Remove(f.Name())
		return "", tooLarge(image, st.maxSize)
	}
	return f.Name(), nil
}

func tooLarge(image string, limit int64) error {
	return &fetchError{status: http.StatusBadRequest, messageID: msgActionParamFormat,
		message: fmt.Sprintf("The image at %s is larger than the %d bytes this device takes.", image, limit)}
}

// sanitize keeps a file name to letters, digits, '.', '_' and '-'.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
}

// mediaFiles lists the files the BMC's slots hold, for Close.
func (m *model) mediaFiles() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var files []string
	for _, s := range m.systems {
		for _, sl := range s.media {
			if sl.file != "" {
				files = append(files, sl.file)
			}
		}
	}
	return files
}
