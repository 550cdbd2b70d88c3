package boot_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
)

const (
	originUser = "fw-user"
	originPass = "fw-pass"
	imageSize  = 300<<10 + 17
)

// origin is an image server on loopback that asks for basic auth, serving one image at
// /images/bios.bin. gate, when set, holds every answer until it is closed.
type origin struct {
	*httptest.Server
	image    []byte
	requests atomic.Int64
	gate     chan struct{}
}

func newOrigin(t *testing.T, gated bool) *origin {
	t.Helper()
	o := &origin{image: make([]byte, imageSize)}
	_, _ = rand.Read(o.image)
	if gated {
		o.gate = make(chan struct{})
	}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.requests.Add(1)
		if o.gate != nil {
			select {
			case <-o.gate:
			case <-r.Context().Done():
				return
			}
		}
		if user, pass, ok := r.BasicAuth(); !ok || user != originUser || pass != originPass {
			w.Header().Set("WWW-Authenticate", `Basic realm="images"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/images/bios.bin" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(o.image)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) url() string { return o.URL + "/images/bios.bin" }

func (o *origin) checksum() string {
	sum := sha256.Sum256(o.image)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// createImageSecret asks the service for an image, as the firmware controller does.
func createImageSecret(t *testing.T, name string, data map[string]string) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsAll, Name: name,
		Labels: map[string]string{metalv1alpha1.LabelFirmwareImage: "true", metalv1alpha1.LabelServer: "fw-server"}},
		StringData: data}
	require.NoError(t, k8s.Create(context.Background(), sec))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), sec) })
	return sec
}

func imageData(o *origin, checksum string) map[string]string {
	return map[string]string{metalv1alpha1.FirmwareImageURLKey: o.url(), metalv1alpha1.FirmwareImageChecksumKey: checksum,
		metalv1alpha1.FirmwareImageUsernameKey: originUser, metalv1alpha1.FirmwareImagePasswordKey: originPass}
}

// servedURL waits for the service to write served-url into the Secret, and returns it.
func servedURL(t *testing.T, ns, name string) string {
	t.Helper()
	var sec corev1.Secret
	require.Eventually(t, func() bool {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sec) == nil &&
			len(sec.Data[metalv1alpha1.FirmwareImageServedURLKey]) > 0
	}, wait, poll, "served-url written into Secret %s/%s", ns, name)
	return string(sec.Data[metalv1alpha1.FirmwareImageServedURLKey])
}

// firmwareAt is where the test server serves a served-url, and its token.
func firmwareAt(t *testing.T, base, served string) (string, string) {
	t.Helper()
	token, ok := strings.CutPrefix(served, mediaURL+"/firmware/")
	require.True(t, ok, "served at <media URL>/firmware/<token>: %s", served)
	require.Regexp(t, `^[A-Za-z0-9_-]{43}$`, token, "a token, base64url of 256 bits")
	return base + "/firmware/" + token, token
}

func httpBytesSent(t *testing.T, kind string) float64 {
	t.Helper()
	return counterOf(t, "ironfleet_boot_http_sent_bytes_total", kind)
}

// counterOf is the value of the counter name of kind.
func counterOf(t *testing.T, name, kind string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The service writes served-url into an image Secret (once: not again when it is right), and
// serves there exactly the origin's bytes, fetched with its credentials and checked against
// the checksum: GET, HEAD and ranges.
func TestFirmwareImageIsServedAtItsURL(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t, false)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	updates := secretUpdatesOf(nsAll, "fw-served")
	createImageSecret(t, "fw-served", imageData(o, o.checksum()))
	served := servedURL(t, nsAll, "fw-served")
	at, token := firmwareAt(t, srv.URL, served)

	before := httpBytesSent(t, "firmware")
	resp, body := fetch(t, http.MethodGet, at, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, o.image, body, "the origin's bytes")
	assert.Equal(t, boot.FirmwareContentType, resp.Header.Get("Content-Type"))
	assert.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))
	assert.Equal(t, `"`+strings.TrimPrefix(o.checksum(), "sha256:")+`"`, resp.Header.Get("ETag"))
	// Counted when the handler returns, which may be after the client read the last byte.
	assert.Eventually(t, func() bool { return httpBytesSent(t, "firmware") == before+imageSize }, wait, poll, "counted as firmware")
	_, err := os.Stat(svc.FirmwareFile(token))
	assert.NoError(t, err, "the image is kept in the cache directory")

	resp, body = fetch(t, http.MethodHead, at, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, fmt.Sprint(imageSize), resp.Header.Get("Content-Length"))
	assert.Empty(t, body)

	resp, body = fetch(t, http.MethodGet, at, map[string]string{"Range": "bytes=1000-70999"})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, o.image[1000:71000], body)
	assert.Equal(t, int64(1), o.requests.Load(), "fetched once, from the origin, for every request")

	// Written once: a reconcile of the Secret as it is writes nothing.
	writes := secretUpdatesOf(nsAll, "fw-served")
	assert.Equal(t, updates+1, writes)
	require.NoError(t, svc.ReconcileFirmware(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: nsAll, Name: "fw-served"}}))
	assert.Equal(t, writes, secretUpdatesOf(nsAll, "fw-served"), "no write when served-url is right")

	// A wrong served-url is written back.
	var sec corev1.Secret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: nsAll, Name: "fw-served"}, &sec))
	sec.Data[metalv1alpha1.FirmwareImageServedURLKey] = []byte("http://elsewhere/x")
	require.NoError(t, k8s.Update(ctx, &sec))
	require.Eventually(t, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: nsAll, Name: "fw-served"}, &sec) == nil &&
			string(sec.Data[metalv1alpha1.FirmwareImageServedURLKey]) == served
	}, wait, poll)
}

// A token that names no image Secret gets 404 and nothing else: an unknown one, one with a
// character changed, a short one, an SBC's boot token.
func TestFirmwareUnknownTokenIsNotFound(t *testing.T) {
	o := newOrigin(t, false)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	createImageSecret(t, "fw-unknown", imageData(o, o.checksum()))
	_, token := firmwareAt(t, srv.URL, servedURL(t, nsAll, "fw-unknown"))
	changed := []byte(token)
	changed[10] ^= 1
	for _, tok := range []string{strings.Repeat("A", 43), string(changed), token[:20], token + "A"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			resp, body := fetch(t, method, srv.URL+"/firmware/"+tok, nil)
			assert.Equal(t, http.StatusNotFound, resp.StatusCode, tok)
			if method == http.MethodGet {
				assert.Equal(t, "Not Found\n", string(body), "no detail")
			}
		}
	}
}

// An image that does not match its checksum is refused with 502: not a byte of it is sent,
// and no file of it is kept.
func TestFirmwareChecksumMismatchIsRefused(t *testing.T) {
	o := newOrigin(t, false)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	createImageSecret(t, "fw-mismatch", imageData(o, "sha256:"+strings.Repeat("ab", 32)))
	at, token := firmwareAt(t, srv.URL, servedURL(t, nsAll, "fw-mismatch"))
	errorsBefore := counterOf(t, "ironfleet_boot_http_errors_total", "bad_gateway")
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		resp, body := fetch(t, method, at, nil)
		assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
		assert.NotContains(t, string(body), string(o.image[:64]))
		assert.LessOrEqual(t, len(body), 64, "an error, not the image")
	}
	assert.Eventually(t, func() bool { return counterOf(t, "ironfleet_boot_http_errors_total", "bad_gateway") >= errorsBefore+2 }, wait, poll, "counted as bad_gateway")
	_, err := os.Stat(svc.FirmwareFile(token))
	assert.ErrorIs(t, err, os.ErrNotExist, "no file kept")
	assert.GreaterOrEqual(t, o.requests.Load(), int64(2), "fetched again for each request, none kept")

	// Wrong credentials: the origin's 401 is a 502.
	data := imageData(o, o.checksum())
	data[metalv1alpha1.FirmwareImagePasswordKey] = "wrong"
	createImageSecret(t, "fw-unauthorized", data)
	at, _ = firmwareAt(t, srv.URL, servedURL(t, nsAll, "fw-unauthorized"))
	resp, _ := fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
}

// Requests for an image while it is fetched wait for the one download, and all get it.
func TestFirmwareConcurrentRequestsShareOneDownload(t *testing.T) {
	o := newOrigin(t, true)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	createImageSecret(t, "fw-shared", imageData(o, o.checksum()))
	at, _ := firmwareAt(t, srv.URL, servedURL(t, nsAll, "fw-shared"))

	const n = 5
	var wg sync.WaitGroup
	bodies := make([][]byte, n)
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(at)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			bodies[i] = make([]byte, 0, imageSize)
			buf := make([]byte, 32<<10)
			for {
				k, err := resp.Body.Read(buf)
				bodies[i] = append(bodies[i], buf[:k]...)
				if err != nil {
					return
				}
			}
		}()
	}
	// The download is under way (started when served-url was written), held by the origin.
	require.Eventually(t, func() bool { return o.requests.Load() >= 1 }, wait, poll)
	close(o.gate)
	wg.Wait()
	for i := range n {
		assert.Equal(t, http.StatusOK, codes[i])
		assert.Equal(t, o.image, bodies[i])
	}
	assert.Equal(t, int64(1), o.requests.Load(), "one download for every request")
}

// Deleting the Secret kills its URL and removes the image's file; a Secret re-created under the
// same name is served at another URL.
func TestFirmwareURLDiesWithItsSecret(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t, false)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	sec := createImageSecret(t, "fw-deleted", imageData(o, o.checksum()))
	at, token := firmwareAt(t, srv.URL, servedURL(t, nsAll, "fw-deleted"))
	resp, body := fetch(t, http.MethodGet, at, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, o.image, body)
	file := svc.FirmwareFile(token)
	_, err := os.Stat(file)
	require.NoError(t, err)

	require.NoError(t, k8s.Delete(ctx, sec))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{}))
	}, wait, poll)
	resp, _ = fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the URL dies with its Secret at once")
	require.Eventually(t, func() bool {
		_, err := os.Stat(file)
		return os.IsNotExist(err)
	}, wait, poll, "the image's file is removed")

	// Re-created under the same name: another UID, another token; the old URL stays dead.
	createImageSecret(t, "fw-deleted", imageData(o, o.checksum()))
	again, newToken := firmwareAt(t, srv.URL, servedURL(t, nsAll, "fw-deleted"))
	assert.NotEqual(t, token, newToken)
	resp, body = fetch(t, http.MethodGet, again, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, o.image, body)
	resp, _ = fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// A boot service that boots only some Servers serves only their images (by the Secret's
// server label): another boot service may share the namespace.
func TestFirmwareImagesOfServersNotBootedAreLeftAlone(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t, false)
	createServer(t, "fw-ours", map[string]string{filterLabel: "ours"})
	createServer(t, "fw-theirs", map[string]string{filterLabel: "theirs"})
	var theirs *corev1.Secret
	for _, server := range []string{"fw-theirs", "fw-ours"} { // theirs first
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsFiltered, Name: "image-" + server,
			Labels: map[string]string{metalv1alpha1.LabelFirmwareImage: "true", metalv1alpha1.LabelServer: server}},
			StringData: imageData(o, o.checksum())}
		require.NoError(t, k8s.Create(ctx, sec))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), sec) })
		if server == "fw-theirs" {
			theirs = sec
		}
	}
	served := servedURL(t, nsFiltered, "image-fw-ours")
	assert.True(t, strings.HasPrefix(served, mediaURL+"/firmware/"), served)
	// Reconciled now, whatever its controller did meanwhile: nothing is written.
	require.NoError(t, svcFiltered.ReconcileFirmware(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(theirs)}))
	var sec corev1.Secret
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(theirs), &sec))
	assert.Empty(t, sec.Data[metalv1alpha1.FirmwareImageServedURLKey], "another boot service's image")
	assert.Zero(t, secretUpdatesOf(nsFiltered, theirs.Name))
}
