package boot

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Firmware images for BMCs that cannot reach an image's origin (FirmwareImage.ServedBy
// BootService). The firmware controller asks for one with a Secret in the boot namespace
// labelled metal.ironfleet.dev/firmware-image=true, holding the origin's URL, the image's
// checksum and the origin's credentials (apis/metal/v1alpha1/firmwareimage.go). The service
// writes into it served-url, <MediaURL>/firmware/<token>, whose token is an HMAC of the Secret
// (its namespace, name and UID: tokenSigner.firmwareToken), and serves the image there to GET
// and HEAD, Range included.
//
// The image is downloaded from its origin into a file of Config.FirmwareCacheDir, one per
// Secret, as soon as served-url is written (and on a request, when there is no file or
// download for it), and checked against the checksum before a byte of it is served; concurrent
// requests share the one download. Nothing about an image is kept but that file and this
// process's memory of it: when the Secret is deleted, its URL answers 404 at once (every
// request reads the Secret from the API server) and its file is removed when the deletion
// reaches the service's cache (sweepFirmware), as is, at start, any file the process does not
// know.
const (
	// FirmwarePathPrefix is the path of the firmware images' URLs, before the token.
	FirmwarePathPrefix = "/firmware/"
	// FirmwareContentType is what images are served as: the BMC knows what it asked for.
	FirmwareContentType = "application/octet-stream"

	kindFirmware = "firmware"

	// firmwareFilePrefix starts the names of the files in the cache directory: the sweep
	// touches no other.
	firmwareFilePrefix = "fw-"
	firmwarePartInfix  = ".part-"
)

// Results of a firmware download, as metric labels.
const (
	fetchOK       = "ok"
	fetchMismatch = "checksum_mismatch"
	fetchTooLarge = "too_large"
	fetchOrigin   = "origin_error"
	fetchInvalid  = "invalid"
	fetchInternal = "internal" // the cache directory
)

// errFirmwareGone: the image's Secret went (or asked for another image) while it was fetched.
var errFirmwareGone = errors.New("the firmware image is no longer asked for")

// fetchError is why an image could not be fetched or verified. Its message never holds the
// origin's URL (which may carry a signature in its query) or the token.
type fetchError struct {
	result  string // a metric label: fetchMismatch, fetchTooLarge, fetchOrigin, fetchInvalid
	problem string
}

func (e *fetchError) Error() string { return e.problem }

func fetchFailed(result, format string, args ...any) error {
	return &fetchError{result: result, problem: fmt.Sprintf(format, args...)}
}

// firmwareSource is where an image comes from, as its Secret says.
type firmwareSource struct {
	url *url.URL
	// checksum is the image's SHA-256 in lower-case hex; "" when the Secret has none.
	checksum           string
	username, password string
	// sum tells sources apart: a download is of one source.
	sum [sha256.Size]byte
}

var checksumPattern = regexp.MustCompile(`^sha256:[0-9a-fA-F]{64}$`)

// firmwareSourceOf reads an image Secret. Its errors name the key that is wrong, never the URL.
func firmwareSourceOf(secret *corev1.Secret) (firmwareSource, error) {
	raw := strings.TrimSpace(string(secret.Data[metalv1alpha1.FirmwareImageURLKey]))
	u, err := url.Parse(raw)
	if raw == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return firmwareSource{}, fetchFailed(fetchInvalid, "%q is not an http or https URL", metalv1alpha1.FirmwareImageURLKey)
	}
	src := firmwareSource{url: u,
		username: string(secret.Data[metalv1alpha1.FirmwareImageUsernameKey]),
		password: string(secret.Data[metalv1alpha1.FirmwareImagePasswordKey])}
	if c := strings.TrimSpace(string(secret.Data[metalv1alpha1.FirmwareImageChecksumKey])); c != "" {
		if !checksumPattern.MatchString(c) {
			return firmwareSource{}, fetchFailed(fetchInvalid, "%q is not sha256:<64 hex digits>", metalv1alpha1.FirmwareImageChecksumKey)
		}
		src.checksum = strings.ToLower(strings.TrimPrefix(c, "sha256:"))
	}
	h := sha256.New()
	for _, part := range []string{raw, src.checksum, src.username, src.password} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	copy(src.sum[:], h.Sum(nil))
	return src, nil
}

// firmwareCache is the images downloaded or being downloaded, by token, each in a file of dir.
type firmwareCache struct {
	dir     string
	max     int64
	timeout time.Duration
	client  *http.Client
	log     logr.Logger

	mu      sync.Mutex
	entries map[string]*firmwareEntry
}

// firmwareEntry is one image: its download, then its file.
type firmwareEntry struct {
	source [sha256.Size]byte
	cancel context.CancelFunc
	done   chan struct{}
	// Set before done is closed: the file and its ETag, or why there is none.
	path string
	etag string
	err  error
}

func newFirmwareCache(cfg Config, log logr.Logger) *firmwareCache {
	// The system's roots for https origins; the environment's proxy (never for loopback); the
	// image's bytes as the origin has them, not decoded from a compression asked for here.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return &firmwareCache{dir: cfg.FirmwareCacheDir, max: cfg.FirmwareMaxBytes, timeout: cfg.FirmwareFetchTimeout,
		client: &http.Client{Transport: t}, log: log, entries: map[string]*firmwareEntry{}}
}

// firmwareFileName is the file of a token's image: named by a hash of the token, so that the
// directory's listing does not hold the tokens.
func firmwareFileName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return firmwareFilePrefix + hex.EncodeToString(sum[:])
}

// entryLocked is token's entry for src: the one there, or a new download when there is none or
// it is of another source (the Secret rewritten in place).
func (c *firmwareCache) entryLocked(token string, src firmwareSource, secret string) *firmwareEntry {
	if e, ok := c.entries[token]; ok {
		if e.source == src.sum {
			return e
		}
		c.dropLocked(token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	e := &firmwareEntry{source: src.sum, cancel: cancel, done: make(chan struct{})}
	c.entries[token] = e
	go c.download(ctx, token, e, src, secret)
	return e
}

// prefetch starts the download of token's image unless it is there or under way.
func (c *firmwareCache) prefetch(token string, src firmwareSource, secret string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entryLocked(token, src, secret)
}

// open is token's image, downloaded (or joining the download under way) and verified: its
// file, open, and its ETag. It waits for the download as long as ctx lets it.
func (c *firmwareCache) open(ctx context.Context, token string, src firmwareSource, secret string) (*os.File, string, error) {
	c.mu.Lock()
	e := c.entryLocked(token, src, secret)
	c.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	if e.err != nil {
		return nil, "", e.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[token] != e {
		return nil, "", errFirmwareGone
	}
	f, err := os.Open(e.path)
	if err != nil {
		return nil, "", err
	}
	return f, e.etag, nil
}

// download fetches token's image for e, then keeps its file if e is still token's entry. A
// failed download is forgotten: the next request tries again.
func (c *firmwareCache) download(ctx context.Context, token string, e *firmwareEntry, src firmwareSource, secret string) {
	defer e.cancel()
	tmp, etag, size, err := c.fetch(ctx, token, src)
	c.mu.Lock()
	current := c.entries[token] == e
	switch {
	case !current:
		if err == nil {
			_ = os.Remove(tmp)
		}
		err = errFirmwareGone // cancelled, or fetched for nothing: who waited gets 404
	case err == nil:
		final := filepath.Join(c.dir, firmwareFileName(token))
		if err = os.Rename(tmp, final); err != nil {
			_ = os.Remove(tmp)
		} else {
			e.path, e.etag = final, etag
		}
	}
	if err != nil && current {
		delete(c.entries, token)
	}
	e.err = err
	// Logged before the requests that waited for it answer.
	c.logFetch(err, current, size, src, secret)
	close(e.done)
	c.mu.Unlock()
}

// logFetch logs and counts the end of a download.
func (c *firmwareCache) logFetch(err error, current bool, size int64, src firmwareSource, secret string) {
	result := fetchOK
	var fe *fetchError
	switch {
	case !current:
		return // its Secret went meanwhile: nothing to say
	case errors.As(err, &fe):
		result = fe.result
	case err != nil:
		result = fetchInternal
	}
	firmwareFetches.WithLabelValues(result).Inc()
	// The origin by its host only: its URL may carry a signature, and the token is a secret.
	kv := []any{"secret", secret, "origin", src.url.Host}
	if result == fetchOK {
		c.log.Info("firmware image fetched", append(kv, "bytes", size, "checksumVerified", src.checksum != "")...)
		return
	}
	c.log.Info("firmware image not served: fetching or verifying it failed", append(kv, "result", result, "problem", err.Error())...)
}

// fetch downloads src into a new file of the cache directory, at most c.max bytes, and checks
// its checksum; it returns the file, its ETag and its size. Nothing is left behind on error.
func (c *firmwareCache) fetch(ctx context.Context, token string, src firmwareSource) (string, string, int64, error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return "", "", 0, fmt.Errorf("making the firmware cache directory: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.url.String(), nil)
	if err != nil {
		return "", "", 0, fetchFailed(fetchInvalid, "the request cannot be made")
	}
	if src.username != "" || src.password != "" {
		req.SetBasicAuth(src.username, src.password)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", "", 0, fetchFailed(fetchOrigin, "fetching: %v", withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", 0, fetchFailed(fetchOrigin, "the origin answered %s", resp.Status)
	}
	if resp.ContentLength > c.max {
		return "", "", 0, fetchFailed(fetchTooLarge, "%d bytes, more than the %d served", resp.ContentLength, c.max)
	}
	f, err := os.CreateTemp(c.dir, firmwareFileName(token)+firmwarePartInfix+"*")
	if err != nil {
		return "", "", 0, fmt.Errorf("making a file for the image: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, c.max+1))
	firmwareFetchedBytes.Add(float64(n))
	closeErr := f.Close()
	fail := func(err error) (string, string, int64, error) {
		_ = os.Remove(f.Name())
		return "", "", 0, err
	}
	switch {
	case n > c.max:
		return fail(fetchFailed(fetchTooLarge, "more than the %d bytes served", c.max))
	case err != nil:
		return fail(fetchFailed(fetchOrigin, "reading: %v", withoutURL(err)))
	case closeErr != nil:
		return fail(fmt.Errorf("writing the image: %w", closeErr))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if src.checksum != "" && sum != src.checksum {
		return fail(fetchFailed(fetchMismatch, "its SHA-256 is not the checksum asked for (%d bytes fetched)", n))
	}
	return f.Name(), `"` + sum + `"`, n, nil
}

// withoutURL is err without the URL net/http's client errors name.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// dropLocked forgets token's image: its download is cancelled, its file removed (a response
// under way reads on from its open file). It says whether it removed a file.
func (c *firmwareCache) dropLocked(token string) bool {
	e, ok := c.entries[token]
	if !ok {
		return false
	}
	delete(c.entries, token)
	e.cancel()
	select {
	case <-e.done:
		return e.path != "" && os.Remove(e.path) == nil
	default: // the download removes its file when it ends
		return false
	}
}

// sweep forgets the images of tokens not live, and removes every file of the cache directory
// that is not a live image's (or its download's): the files of Secrets deleted, and of an
// earlier process. It returns how many files it removed.
func (c *firmwareCache) sweep(live map[string]bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	removed := 0
	for token := range c.entries {
		if !live[token] && c.dropLocked(token) {
			removed++
		}
	}
	keep := make(map[string]bool, len(c.entries))
	for token := range c.entries {
		keep[firmwareFileName(token)] = true
	}
	files, err := os.ReadDir(c.dir)
	if errors.Is(err, os.ErrNotExist) {
		return removed, nil
	}
	if err != nil {
		return removed, fmt.Errorf("listing the firmware cache directory: %w", err)
	}
	var errs []error
	for _, f := range files {
		name := f.Name()
		base, _, _ := strings.Cut(name, firmwarePartInfix)
		if !strings.HasPrefix(name, firmwareFilePrefix) || keep[base] || f.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// isFirmwareImage says whether a Secret asks for a firmware image.
func isFirmwareImage(o client.Object) bool {
	return o.GetLabels()[metalv1alpha1.LabelFirmwareImage] == "true"
}

// firmwareImageEvents passes the events of image Secrets, and of a Secret that stops being one.
func firmwareImageEvents() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isFirmwareImage(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isFirmwareImage(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return isFirmwareImage(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return isFirmwareImage(e.ObjectOld) || isFirmwareImage(e.ObjectNew)
		},
	}
}

// servesFirmware says whether an image Secret is this service's to serve: labelled, not being
// deleted, in its namespace, and, when it boots only some Servers (a server filter: several
// boot services share the namespace), for one of them, by the Secret's
// metal.ironfleet.dev/server label.
func (s *Service) servesFirmware(ctx context.Context, secret *corev1.Secret) (bool, error) {
	if !isFirmwareImage(secret) || !secret.DeletionTimestamp.IsZero() || !s.servedNamespace(secret.Namespace) {
		return false, nil
	}
	if s.cfg.ServerFilter == nil {
		return true, nil
	}
	name := secret.Labels[metalv1alpha1.LabelServer]
	if name == "" {
		return false, nil // whose it is cannot be told: another boot service may serve it
	}
	var server metalv1alpha1.Server
	if err := s.client.Get(ctx, client.ObjectKey{Name: name}, &server); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading server %s: %w", name, err)
	}
	return s.served(&server), nil
}

// firmwareURL is the URL of an image, as BMCs reach the service.
func (s *Service) firmwareURL(token string) string {
	return s.cfg.MediaURL + FirmwarePathPrefix + token
}

// reconcileFirmware writes served-url into an image Secret when it is not right, and starts
// the image's download; an image Secret gone (or no longer this service's) has its file, and
// every other file no Secret asks for, removed.
func (s *Service) reconcileFirmware(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if !s.servedNamespace(req.Namespace) {
		return ctrl.Result{}, nil
	}
	var secret corev1.Secret
	err := s.client.Get(ctx, req.NamespacedName, &secret)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	serves := false
	if err == nil {
		if serves, err = s.servesFirmware(ctx, &secret); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !serves {
		return ctrl.Result{}, s.sweepFirmware(ctx)
	}
	token := s.tokens.firmwareToken(&secret)
	want := s.firmwareURL(token)
	if string(secret.Data[metalv1alpha1.FirmwareImageServedURLKey]) != want {
		updated := secret.DeepCopy()
		if updated.Data == nil {
			updated.Data = map[string][]byte{}
		}
		updated.Data[metalv1alpha1.FirmwareImageServedURLKey] = []byte(want)
		if err := s.client.Update(ctx, updated); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				// The cache had an older copy, or it went: its event brings it back here.
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("writing %s into firmware image Secret %s: %w", metalv1alpha1.FirmwareImageServedURLKey, secret.Name, err)
		}
		log.FromContext(ctx).Info("firmware image URL written into its Secret", "key", metalv1alpha1.FirmwareImageServedURLKey)
	}
	src, err := firmwareSourceOf(&secret)
	if err != nil {
		log.FromContext(ctx).Info("firmware image Secret cannot be served: its image is answered 502", "problem", err.Error())
		return ctrl.Result{}, nil
	}
	// Fetched now, not on the BMC's first request: a BMC waiting for the whole download before
	// it hears a byte might give up.
	s.firmware.prefetch(token, src, secret.Name)
	return ctrl.Result{}, nil
}

// sweepFirmware removes the images (and their files) no image Secret of this service's asks
// for any more, as its cache has the Secrets now.
func (s *Service) sweepFirmware(ctx context.Context) error {
	var list corev1.SecretList
	opts := []client.ListOption{client.MatchingLabels{metalv1alpha1.LabelFirmwareImage: "true"}}
	if s.cfg.Namespace != "" {
		opts = append(opts, client.InNamespace(s.cfg.Namespace))
	}
	if err := s.client.List(ctx, &list, opts...); err != nil {
		return fmt.Errorf("listing firmware image Secrets: %w", err)
	}
	live := map[string]bool{}
	for i := range list.Items {
		serves, err := s.servesFirmware(ctx, &list.Items[i])
		if err != nil {
			return err
		}
		if serves {
			live[s.tokens.firmwareToken(&list.Items[i])] = true
		}
	}
	removed, err := s.firmware.sweep(live)
	if removed > 0 {
		s.log.Info("removed firmware images no Secret asks for any more", "files", removed)
	}
	return err
}

// firmwareByToken is the image Secret a token names, as the API server has it now (found
// through the cache index, then read again, so that a Secret deleted a moment ago is refused
// even if the cache has not caught up); nil when there is none this service serves.
func (s *Service) firmwareByToken(ctx context.Context, token string) (*corev1.Secret, error) {
	if len(token) != 43 { // base64 of a SHA-256 HMAC
		return nil, nil
	}
	var list corev1.SecretList
	opts := []client.ListOption{client.MatchingFields{indexFirmwareToken: token}}
	if s.cfg.Namespace != "" {
		opts = append(opts, client.InNamespace(s.cfg.Namespace))
	}
	if err := s.client.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("looking up a firmware image: %w", err)
	}
	for i := range list.Items {
		var secret corev1.Secret
		err := s.api.Get(ctx, client.ObjectKeyFromObject(&list.Items[i]), &secret)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading firmware image Secret %s: %w", list.Items[i].Name, err)
		}
		if err != nil {
			continue
		}
		serves, err := s.servesFirmware(ctx, &secret)
		if err != nil {
			return nil, err
		}
		if serves && subtle.ConstantTimeCompare([]byte(s.tokens.firmwareToken(&secret)), []byte(token)) == 1 {
			return &secret, nil
		}
	}
	return nil, nil
}

// serveFirmware serves an image (GET and HEAD, Range and If-Range included) once it is
// downloaded and verified: an unknown token 404, an image that cannot be fetched or does not
// match its checksum 502, and not a byte of it.
func (s *Service) serveFirmware(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	secret, err := s.firmwareByToken(ctx, token)
	cancel()
	if err != nil {
		s.log.Error(err, "resolving a firmware image URL")
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	if secret == nil {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	src, err := firmwareSourceOf(secret)
	if err != nil {
		s.log.Info("refused a firmware image: its Secret cannot be served", "secret", secret.Name, "problem", err.Error())
		s.fail(w, http.StatusBadGateway, errBadGateway)
		return
	}
	f, etag, err := s.firmware.open(r.Context(), token, src, secret.Name)
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		return // the client left while the image was fetched
	case errors.Is(err, errFirmwareGone):
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	case err != nil:
		// Logged by the download, once for all who waited for it.
		s.fail(w, http.StatusBadGateway, errBadGateway)
		return
	}
	defer f.Close()
	extendWriteDeadline(r.Context())
	w.Header().Set("Content-Type", FirmwareContentType)
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-store")
	cw := &countingWriter{ResponseWriter: w}
	http.ServeContent(cw, r, "", time.Time{}, f)
	httpBytes.WithLabelValues(kindFirmware).Add(float64(cw.n))
}
