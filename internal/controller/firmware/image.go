package firmware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// MaxImageBytes bounds a firmware image the manager fetches to push it to a BMC itself.
const MaxImageBytes = 4 << 30

// pushedImage is an image the manager fetches, once, for a BMC that takes images only by a
// multipart push (HPE's iLO 6 offers no SimpleUpdate): downloaded to a temporary file and
// checked against the baseline's checksum before a byte goes to the BMC. The BMC client opens
// it as often as it needs (to measure it, then to send it); close removes the file.
type pushedImage struct {
	image      metalv1alpha1.FirmwareImage
	user, pass string
	// timeout bounds the download (the controller's one worker waits for it).
	timeout time.Duration

	once sync.Once
	path string
	err  error
}

// open is bmc.UpdateRequest.Image.
func (p *pushedImage) open(ctx context.Context) (io.ReadCloser, error) {
	p.once.Do(func() { p.path, p.err = p.fetch(ctx) })
	if p.err != nil {
		return nil, p.err
	}
	return os.Open(p.path)
}

func (p *pushedImage) close() {
	if p.path != "" {
		_ = os.Remove(p.path)
	}
}

// fetch downloads the image and checks its checksum. Errors name the image by its host only:
// its URL may carry a token.
func (p *pushedImage) fetch(ctx context.Context) (string, error) {
	host := hostOf(p.image.URL)
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.image.URL, nil)
	if err != nil {
		return "", fmt.Errorf("the image at %s: %w", host, errors.Unwrap(err))
	}
	if p.user != "" || p.pass != "" {
		req.SetBasicAuth(p.user, p.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching the image from %s to push it to the BMC failed", host)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching the image from %s to push it to the BMC: %s", host, resp.Status)
	}
	f, err := os.CreateTemp("", "ironfleet-firmware-*")
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum), io.LimitReader(resp.Body, MaxImageBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		err = fmt.Errorf("fetching the image from %s: %w", host, err)
	case n > MaxImageBytes:
		err = fmt.Errorf("the image at %s is larger than %d bytes", host, int64(MaxImageBytes))
	case p.image.Checksum != "" && "sha256:"+hex.EncodeToString(sum.Sum(nil)) != p.image.Checksum:
		err = fmt.Errorf("the image at %s has sha256:%s, not the baseline's %s: not pushed", host, hex.EncodeToString(sum.Sum(nil)), p.image.Checksum)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// hostOf is a URL's host, for messages: never its path or query, which may carry a token.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an unparsable URL)"
	}
	return u.Host
}
