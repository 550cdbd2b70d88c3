package install

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Download limits; tests shorten them.
var (
	// HeaderTimeout bounds connecting to the image's server and receiving the response headers,
	// per request.
	HeaderTimeout = 30 * time.Second
	// StallTimeout bounds the wait for the next bytes of a response body.
	StallTimeout = 2 * time.Minute
	// HTTPAttempts is how many requests an http(s) image gets at most before its body starts.
	HTTPAttempts = 4
	// retryWait is the wait after the first failed attempt; it doubles after each.
	retryWait = time.Second
)

var checksumPattern = regexp.MustCompile(`^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$`)

// source is the image as served: every byte read from it is hashed, and a read error is
// classified once, when it happens.
type source struct {
	desc string // what the messages call the image: the URL without its query, or the oci reference
	body io.ReadCloser
	size int64 // bytes served, -1 when unknown

	algo   string
	hasher hash.Hash
	read   int64
	eof    bool
	err    *Error // the first read error other than io.EOF, classified

	// want is the digest the served bytes must have ("" for none) and wantName what it is
	// called in a mismatch message.
	want, wantName string
	// classify turns a read error of the body into an install error.
	classify func(s *source, err error) *Error
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.hasher.Write(p[:n])
		s.read += int64(n)
	}
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil && s.err == nil:
		s.err = s.classify(s, err)
	}
	return n, err
}

func (s *source) Close() error { return s.body.Close() }

// digest is the served bytes' digest so far, algorithm:hex.
func (s *source) digest() string {
	return s.algo + ":" + hex.EncodeToString(s.hasher.Sum(nil))
}

// drain reads the rest of the served bytes (after the decompressor stopped, or failed), so that
// the digest covers them all.
func (s *source) drain(ctx context.Context) *Error {
	buf := make([]byte, 256<<10)
	for !s.eof && s.err == nil {
		if err := ctx.Err(); err != nil {
			return newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted while reading %s: %v", s.desc, err)
		}
		if _, err := s.Read(buf); err != nil && err != io.EOF && s.err == nil {
			s.err = s.classify(s, err)
		}
	}
	return s.err
}

// check compares the digest of everything served with the one wanted.
func (s *source) check() *Error {
	if s.want == "" {
		return nil
	}
	if got := s.digest(); got != s.want {
		return newError(metalv1alpha1.InstallReasonChecksumMismatch, "image digest %s does not match %s %s (%d bytes read from %s)", got, s.wantName, s.want, s.read, s.desc)
	}
	return nil
}

// openSource starts the download of image, whose served bytes must have checksum when given.
func openSource(ctx context.Context, client *http.Client, image, checksum string) (*source, error) {
	if checksum != "" && !checksumPattern.MatchString(checksum) {
		return nil, newError(metalv1alpha1.InstallReasonChecksumMismatch, "imageChecksum %q is not sha256:<64 hex digits> or sha512:<128 hex digits>", clip(checksum, 160))
	}
	rt := http.DefaultTransport
	if client != nil && client.Transport != nil {
		rt = client.Transport
	}
	rt = &timeoutTransport{rt: rt}
	switch {
	case strings.HasPrefix(image, "http://"), strings.HasPrefix(image, "https://"):
		if checksum == "" {
			return nil, newError(metalv1alpha1.InstallReasonChecksumMismatch, "imageChecksum is required for an http(s) image")
		}
		hc := &http.Client{Transport: rt}
		if client != nil {
			hc.CheckRedirect, hc.Jar = client.CheckRedirect, client.Jar
		}
		return openHTTP(ctx, hc, image, checksum)
	case strings.HasPrefix(image, "oci://"):
		return openOCI(ctx, rt, image, checksum)
	}
	return nil, newError(metalv1alpha1.InstallReasonImageUnreachable, "image %q is not an http://, https:// or oci:// reference", clip(image, 256))
}

func newHasher(algo string) hash.Hash {
	if algo == "sha512" {
		return sha512.New()
	}
	return sha256.New()
}

// redactURL is u without its query and fragment (a signed URL's signature must not end up in a
// report) and without user information.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the image URL"
	}
	query := u.RawQuery != ""
	u.User, u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = nil, "", "", "", false
	s := u.String()
	if query {
		s += "?…"
	}
	return s
}

// openHTTP GETs the image, retrying connection errors, 5xx and 429 before the body starts.
func openHTTP(ctx context.Context, client *http.Client, rawURL, checksum string) (*source, error) {
	desc := redactURL(rawURL)
	algo, want, _ := strings.Cut(checksum, ":")
	attempts := max(HTTPAttempts, 1)
	wait := retryWait
	var last string
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted while retrying %s (%s)", desc, last)
			case <-t.C:
			}
			wait *= 2
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, newError(metalv1alpha1.InstallReasonImageUnreachable, "image URL %s: %v", desc, scrub(err, rawURL, desc))
		}
		req.Header.Set("Accept-Encoding", "identity")
		req.Header.Set("User-Agent", "metalprobe")
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted while requesting %s", desc)
			}
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			last = scrub(err, rawURL, desc).Error()
			continue
		}
		if resp.StatusCode == http.StatusOK {
			return &source{
				desc: desc, body: resp.Body, size: resp.ContentLength,
				algo: algo, hasher: newHasher(algo),
				want: algo + ":" + want, wantName: "imageChecksum",
				classify: classifyHTTP,
			}, nil
		}
		status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			last = "answered " + status
			continue
		}
		return nil, newError(metalv1alpha1.InstallReasonImageUnreachable, "GET %s answered %s", desc, status)
	}
	return nil, newError(metalv1alpha1.InstallReasonImageUnreachable, "GET %s: %s (after %d attempts)", desc, last, attempts)
}

func classifyHTTP(s *source, err error) *Error {
	return newError(metalv1alpha1.InstallReasonImageUnreachable, "reading %s after %d bytes: %v", s.desc, s.read, err)
}

// scrub replaces the full URL (with its query) in an error by its redacted form.
func scrub(err error, rawURL, desc string) error {
	msg := err.Error()
	if !strings.Contains(msg, rawURL) {
		if u, perr := url.Parse(rawURL); perr == nil && u.RawQuery != "" && strings.Contains(msg, u.RawQuery) {
			return errors.New(strings.ReplaceAll(msg, u.RawQuery, "…"))
		}
		return err
	}
	return errors.New(strings.ReplaceAll(msg, rawURL, desc))
}

// openOCI pulls the manifest of an oci:// reference and opens its single layer's blob.
func openOCI(ctx context.Context, rt http.RoundTripper, image, checksum string) (*source, error) {
	refText := strings.TrimPrefix(image, "oci://")
	ref, err := name.ParseReference(refText, name.WeakValidation)
	if err != nil {
		return nil, newError(metalv1alpha1.InstallReasonImageUnreachable, "%s is not an OCI reference: %v", clip(image, 256), err)
	}
	if isLoopback(ref.Context().RegistryStr()) {
		if ref, err = name.ParseReference(refText, name.WeakValidation, name.Insecure); err != nil {
			return nil, newError(metalv1alpha1.InstallReasonImageUnreachable, "%s is not an OCI reference: %v", clip(image, 256), err)
		}
	}
	unreachable := func(what string, err error) *Error {
		if ctx.Err() != nil {
			return newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted while %s %s", what, image)
		}
		var te *transport.Error
		if errors.As(err, &te) {
			return newError(metalv1alpha1.InstallReasonImageUnreachable, "%s %s: the registry answered %d %s: %v", what, image, te.StatusCode, http.StatusText(te.StatusCode), err)
		}
		return newError(metalv1alpha1.InstallReasonImageUnreachable, "%s %s: %v", what, image, err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithTransport(rt), remote.WithAuth(authn.Anonymous), remote.WithUserAgent("metalprobe"))
	if err != nil {
		return nil, unreachable("pulling the manifest of", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, unreachable("reading the layers of", err)
	}
	if len(layers) != 1 {
		return nil, newError(metalv1alpha1.InstallReasonFormatUnsupported, "%s has %d layers; an image artifact must have exactly one, the disk image", image, len(layers))
	}
	layer := layers[0]
	digest, err := layer.Digest()
	if err != nil {
		return nil, unreachable("reading the layer digest of", err)
	}
	size, err := layer.Size()
	if err != nil {
		return nil, unreachable("reading the layer size of", err)
	}
	if checksum != "" && checksum != digest.String() {
		return nil, newError(metalv1alpha1.InstallReasonChecksumMismatch, "image digest %s (the layer of %s) does not match imageChecksum %s", digest, image, checksum)
	}
	if digest.Algorithm != "sha256" && digest.Algorithm != "sha512" {
		return nil, newError(metalv1alpha1.InstallReasonFormatUnsupported, "the layer of %s has a %s digest; want sha256 or sha512", image, digest.Algorithm)
	}
	// The compressed blob is the blob as stored and served; go-containerregistry's reader
	// checks its size and digest when it reaches the end.
	body, err := layer.Compressed()
	if err != nil {
		return nil, unreachable("fetching the layer of", err)
	}
	return &source{
		desc: image, body: body, size: size,
		algo: digest.Algorithm, hasher: newHasher(digest.Algorithm),
		want: digest.String(), wantName: "the layer digest in the manifest",
		classify: classifyOCI,
	}, nil
}

// classifyOCI tells a blob that does not match its manifest (go-containerregistry's verifying
// reader fails at the end of the blob) from a download that broke.
func classifyOCI(s *source, err error) *Error {
	if s.size >= 0 && s.read >= s.size {
		if got := s.digest(); got != s.want {
			return newError(metalv1alpha1.InstallReasonChecksumMismatch, "image digest %s does not match %s %s (%d bytes read from %s)", got, s.wantName, s.want, s.read, s.desc)
		}
	}
	if strings.Contains(err.Error(), "error verifying") {
		return newError(metalv1alpha1.InstallReasonChecksumMismatch, "the blob of %s is not what its manifest says: %v", s.desc, err)
	}
	return newError(metalv1alpha1.InstallReasonImageUnreachable, "reading %s after %d bytes: %v", s.desc, s.read, err)
}

// isLoopback says whether a registry host[:port] is this machine.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// timeoutTransport bounds each request until its response headers by HeaderTimeout, and its
// body by StallTimeout between reads.
type timeoutTransport struct{ rt http.RoundTripper }

func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	headerTimeout := HeaderTimeout
	timer := time.AfterFunc(headerTimeout, func() {
		cancel(fmt.Errorf("no response within %s", headerTimeout))
	})
	resp, err := t.rt.RoundTrip(req.WithContext(ctx))
	timer.Stop()
	if err != nil {
		cause := context.Cause(ctx)
		cancel(nil)
		if cause != nil && req.Context().Err() == nil {
			return nil, cause
		}
		return nil, err
	}
	if context.Cause(ctx) != nil && req.Context().Err() == nil {
		// The timer fired just as the headers arrived: the request context is gone, so is the body.
		cancel(nil)
		_ = resp.Body.Close()
		return nil, context.Cause(ctx)
	}
	stall := StallTimeout
	body := &watchedBody{rc: resp.Body, cancel: cancel, stall: stall, ctx: ctx}
	body.timer = time.AfterFunc(stall, func() {
		cancel(fmt.Errorf("no data for %s", stall))
	})
	resp.Body = body
	return resp, nil
}

// watchedBody cancels its request when no byte arrives for stall, and when closed.
type watchedBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  time.Duration
	timer  *time.Timer
	once   sync.Once
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.timer.Reset(b.stall)
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); cause != nil && !errors.Is(cause, context.Canceled) && !strings.Contains(err.Error(), cause.Error()) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return err
}
