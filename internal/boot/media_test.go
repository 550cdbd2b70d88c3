package boot_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/u-root/u-root/pkg/cpio"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// createVMSBC makes a virtual-media boot configuration.
func createVMSBC(t *testing.T, name, server, secret string) *metalv1alpha1.ServerBootConfiguration {
	t.Helper()
	sbc := &metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsAll, Name: name,
			Annotations: map[string]string{metalv1alpha1.AnnotationProbeBoot: "boot-" + name}},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef: metalv1alpha1.LocalObjectReference{Name: server}, Purpose: metalv1alpha1.BootPurposeDiscovery,
			Image: "metalprobe:test", BootMethod: metalv1alpha1.BootMethodVirtualMedia,
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret}},
	}
	require.NoError(t, k8s.Create(context.Background(), sbc))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), sbc) })
	return sbc
}

// readyVMBoot makes a server without MACs (a virtual-media boot needs none: no DHCP) and a
// Ready virtual-media boot for it, and returns the ISO's URL from the published Secret.
func readyVMBoot(t *testing.T, name string) string {
	t.Helper()
	createServer(t, name, nil)
	createSecret(t, nsAll, name+"-ignition", ignitionJSON)
	createVMSBC(t, name+"-discovery", name, name+"-ignition")
	waitFor(t, nsAll, name+"-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	return mediaURLOf(t, name+"-discovery")
}

// mediaURLOf reads the ISO URL of a boot configuration from the Secret its status names.
func mediaURLOf(t *testing.T, sbcName string) string {
	t.Helper()
	sbc := getSBC(t, nsAll, sbcName)
	require.NotNil(t, sbc.Status.BootMediaSecretRef, "status.bootMediaSecretRef is set with Ready")
	var sec corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: sbc.Status.BootMediaSecretRef.Name}, &sec))
	return string(sec.Data[boot.MediaURLKey])
}

// isoAt is where the test server serves the ISO of a published media URL, and the boot token.
func isoAt(t *testing.T, base, mediaURL string) (string, string) {
	t.Helper()
	u, err := url.Parse(mediaURL)
	require.NoError(t, err)
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	require.Len(t, parts, 3, mediaURL)
	require.Equal(t, "boot", parts[0])
	require.Equal(t, "probe.iso", parts[2])
	return base + u.Path, parts[1]
}

func fetch(t *testing.T, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// embedded reads the files of an embed area back: gunzip (the one gzip member; zero padding
// after it) and cpio.
func embedded(t *testing.T, area []byte) map[string][]byte {
	t.Helper()
	br := bytes.NewReader(area)
	zr, err := gzip.NewReader(br)
	require.NoError(t, err)
	zr.Multistream(false)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, make([]byte, len(rest)), rest, "zero padding after the archive")
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(raw)))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, r := range recs {
		data, err := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
		require.NoError(t, err)
		files[r.Name] = data
	}
	return files
}

func mediaBytesSent(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "ironfleet_boot_http_sent_bytes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "media" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A Ready virtual-media boot publishes its ISO's URL (at the media URL, as BMCs reach the
// service) in a Secret it owns; the ISO is the template with the boot's ignition and boot URL
// (as the host reaches the service) embedded, in whole, by ranges and by HEAD.
func TestVirtualMediaBootServesItsISO(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	isoURL := readyVMBoot(t, "vm-1")
	assert.True(t, strings.HasPrefix(isoURL, mediaURL+"/boot/"), isoURL)
	at, token := isoAt(t, srv.URL, isoURL)
	assert.Len(t, token, 43)

	// The Secret: the configuration's, by name, owner and key; the status names it; the URL is
	// nowhere in the status or events.
	sbc := getSBC(t, nsAll, "vm-1-discovery")
	assert.Equal(t, "vm-1-discovery-boot-media", sbc.Status.BootMediaSecretRef.Name)
	var sec corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "vm-1-discovery-boot-media"}, &sec))
	assert.Equal(t, []string{boot.MediaURLKey}, keys(sec.Data))
	owner := metav1.GetControllerOf(&sec)
	require.NotNil(t, owner)
	assert.Equal(t, sbc.UID, owner.UID)
	assert.Equal(t, "ServerBootConfiguration", owner.Kind)
	ready := sbc.Status.Conditions[0]
	assert.Contains(t, ready.Message, "as virtual media")
	assert.Contains(t, ready.Message, "vm-1-discovery-boot-media")
	assert.NotContains(t, fmt.Sprintf("%+v", sbc.Status), token)

	before := mediaBytesSent(t)
	resp, iso := fetch(t, http.MethodGet, at, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, boot.MediaContentType, resp.Header.Get("Content-Type"))
	assert.Equal(t, fmt.Sprint(isoSize), resp.Header.Get("Content-Length"))
	assert.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))
	etag := resp.Header.Get("ETag")
	assert.Regexp(t, `^"[0-9a-f]{32}"$`, etag)
	require.Len(t, iso, isoSize)
	assert.Equal(t, isoTemplate[:isoEmbedOffset], iso[:isoEmbedOffset], "the template before the embed area")
	assert.Equal(t, isoTemplate[isoEmbedOffset+isoEmbedSize:], iso[isoEmbedOffset+isoEmbedSize:], "the template after it")
	files := embedded(t, iso[isoEmbedOffset:isoEmbedOffset+isoEmbedSize])
	assert.Equal(t, ignitionJSON, files[bootmedia.EmbedIgnitionPath])
	assert.Equal(t, publicURL+"/boot/"+token, string(files[bootmedia.EmbedBootURLPath]), "the boot URL as the host reaches it")
	// Counted when the handler returns, which may be after the client read the last byte.
	assert.Eventually(t, func() bool { return mediaBytesSent(t) == before+isoSize }, wait, poll, "counted as media")

	// HEAD: the headers only.
	resp, body := fetch(t, http.MethodHead, at, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, fmt.Sprint(isoSize), resp.Header.Get("Content-Length"))
	assert.Equal(t, etag, resp.Header.Get("ETag"))
	assert.Empty(t, body)

	// Ranges: across the start of the embed area, across its end, inside it, the last bytes.
	for _, r := range [][2]int{
		{isoEmbedOffset - 100, isoEmbedOffset + 99},
		{isoEmbedOffset + isoEmbedSize - 7, isoEmbedOffset + isoEmbedSize + 4096},
		{isoEmbedOffset + 10, isoEmbedOffset + 20},
		{0, isoSize - 1},
		{isoSize - 512, isoSize - 1},
	} {
		resp, part := fetch(t, http.MethodGet, at, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", r[0], r[1])})
		assert.Equal(t, http.StatusPartialContent, resp.StatusCode, r)
		assert.Equal(t, fmt.Sprintf("bytes %d-%d/%d", r[0], r[1], isoSize), resp.Header.Get("Content-Range"), r)
		assert.Equal(t, iso[r[0]:r[1]+1], part, r)
	}
	resp, part := fetch(t, http.MethodGet, at, map[string]string{"Range": "bytes=-100"})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, iso[isoSize-100:], part)
	resp, _ = fetch(t, http.MethodGet, at, map[string]string{"Range": fmt.Sprintf("bytes=%d-", isoSize)})
	assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)
	// Several ranges at once: a multipart answer.
	resp, _ = fetch(t, http.MethodGet, at, map[string]string{"Range": fmt.Sprintf("bytes=0-9,%d-%d", isoEmbedOffset, isoEmbedOffset+9)})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/byteranges"), resp.Header.Get("Content-Type"))

	// If-Range: the same ETag resumes; another gets the whole ISO.
	resp, part = fetch(t, http.MethodGet, at, map[string]string{"Range": "bytes=100-199", "If-Range": etag})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, iso[100:200], part)
	resp, part = fetch(t, http.MethodGet, at, map[string]string{"Range": "bytes=100-199", "If-Range": `"another"`})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Len(t, part, isoSize)

	// The Secret unchanged: the same bytes and ETag again, request after request.
	resp, again := fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, etag, resp.Header.Get("ETag"))
	assert.Equal(t, iso, again)

	// The ignition rewritten while the boot stays Ready (say, its probe network fixed): the
	// next request serves the new one, under a new ETag, so a read resumed with If-Range and
	// the old ETag gets the whole new ISO rather than a mix of both.
	rotated := []byte(`{"registryURL":"https://registry.test","token":"rotated","systemUUID":"x","mode":"discovery"}`)
	ign := ignitionSecret(t, "vm-1-ignition")
	ign.Data[ignition.SecretKey] = rotated
	require.NoError(t, k8s.Update(context.Background(), ign))
	resp, again = fetch(t, http.MethodGet, at, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	newETag := resp.Header.Get("ETag")
	assert.Regexp(t, `^"[0-9a-f]{32}"$`, newETag)
	assert.NotEqual(t, etag, newETag)
	require.Len(t, again, isoSize)
	files = embedded(t, again[isoEmbedOffset:isoEmbedOffset+isoEmbedSize])
	assert.Equal(t, rotated, files[bootmedia.EmbedIgnitionPath], "the new ignition")
	assert.Equal(t, publicURL+"/boot/"+token, string(files[bootmedia.EmbedBootURLPath]))
	assert.Equal(t, isoTemplate[:isoEmbedOffset], again[:isoEmbedOffset])
	resp, part = fetch(t, http.MethodGet, at, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", isoEmbedOffset, isoEmbedOffset+99), "If-Range": etag})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the old ETag: the whole ISO")
	assert.Equal(t, again, part)
	resp, part = fetch(t, http.MethodGet, at, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", isoEmbedOffset, isoEmbedOffset+99), "If-Range": newETag})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode, "the new ETag: the range")
	assert.Equal(t, again[isoEmbedOffset:isoEmbedOffset+100], part)
	resp, _ = fetch(t, http.MethodHead, at, nil)
	assert.Equal(t, newETag, resp.Header.Get("ETag"))

	// Neither the token nor the ignition in events.
	require.Eventually(t, func() bool {
		reasons := map[string]bool{}
		for _, ev := range eventsOf(t, "vm-1-discovery") {
			reasons[ev.Reason] = true
		}
		return reasons["BootMediaPublished"] && reasons["BootMediaServed"]
	}, wait, poll)
	for _, ev := range eventsOf(t, "vm-1-discovery") {
		assert.NotContains(t, ev.Note, token)
		assert.NotContains(t, ev.Note, "probe-secret-token")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The ISO is refused (404) for an unknown token, a PXE boot's token, a boot no longer Ready,
// and, at once, a deleted one.
func TestVirtualMediaISORefusals(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	isoURL := readyVMBoot(t, "vm-2")
	at, token := isoAt(t, srv.URL, isoURL)
	resp, _ := fetch(t, http.MethodGet, at, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Guesses.
	for _, guess := range []string{strings.Repeat("A", 43), token[:42], "x"} {
		resp, _ := fetch(t, http.MethodGet, srv.URL+"/boot/"+guess+"/probe.iso", nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, guess)
		resp, _ = fetch(t, http.MethodHead, srv.URL+"/boot/"+guess+"/probe.iso", nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, guess)
	}
	// A PXE boot has an ignition URL but no ISO, and publishes nothing.
	readyBoot(t, "vm-2-pxe", "52:54:00:dd:00:01")
	_, pxeID := script(t, srv.URL, "52:54:00:dd:00:01")
	pxeToken := tokenOf(t, srv.URL, pxeID)
	resp, _ = fetch(t, http.MethodGet, srv.URL+"/boot/"+pxeToken+"/probe.iso", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Nil(t, getSBC(t, nsAll, "vm-2-pxe-discovery").Status.BootMediaSecretRef)
	var none corev1.Secret
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "vm-2-pxe-discovery-boot-media"}, &none)
	assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "no media Secret for a PXE boot: %v", err)

	// No longer Ready.
	sec := ignitionSecret(t, "vm-2-ignition")
	sec.Data = nil
	require.NoError(t, k8s.Update(context.Background(), sec))
	waitFor(t, nsAll, "vm-2-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonIgnitionUnreadable)
	resp, _ = fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	// Ready again: the same URL (the same boot) serves again; deleted: refused at once.
	sec = ignitionSecret(t, "vm-2-ignition")
	sec.Data = map[string][]byte{ignition.SecretKey: ignitionJSON}
	require.NoError(t, k8s.Update(context.Background(), sec))
	waitFor(t, nsAll, "vm-2-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Equal(t, isoURL, mediaURLOf(t, "vm-2-discovery"))
	resp, _ = fetch(t, http.MethodGet, at, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, k8s.Delete(context.Background(), getSBC(t, nsAll, "vm-2-discovery")))
	resp, _ = fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = fetch(t, http.MethodHead, at, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	// Re-created under the same name: another boot, another URL, in the same Secret (taken
	// over from the deleted configuration: envtest runs no garbage collector).
	sbc := createVMSBC(t, "vm-2-discovery", "vm-2", "vm-2-ignition")
	waitFor(t, nsAll, "vm-2-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	var newURL string
	require.Eventually(t, func() bool {
		newURL = mediaURLOf(t, "vm-2-discovery")
		return newURL != isoURL
	}, wait, poll)
	var media corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "vm-2-discovery-boot-media"}, &media))
	assert.Equal(t, sbc.UID, metav1.GetControllerOf(&media).UID)
	newAt, _ := isoAt(t, srv.URL, newURL)
	resp, _ = fetch(t, http.MethodGet, newAt, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// The Secret is written again when it is deleted or changed; a Secret of its name that is
// someone else's is not overwritten, and the boot is not Ready.
func TestBootMediaSecretIsKept(t *testing.T) {
	isoURL := readyVMBoot(t, "vm-3")
	ctx := context.Background()
	key := client.ObjectKey{Namespace: nsAll, Name: "vm-3-discovery-boot-media"}
	var sec corev1.Secret
	require.NoError(t, k8s.Get(ctx, key, &sec))
	sec.Data[boot.MediaURLKey] = []byte("http://elsewhere/x.iso")
	require.NoError(t, k8s.Update(ctx, &sec))
	require.Eventually(t, func() bool { return mediaURLOf(t, "vm-3-discovery") == isoURL }, wait, poll, "changed: written back")
	require.NoError(t, k8s.Delete(ctx, &sec))
	require.Eventually(t, func() bool {
		var s corev1.Secret
		return k8s.Get(ctx, key, &s) == nil && string(s.Data[boot.MediaURLKey]) == isoURL
	}, wait, poll, "deleted: created again")

	// Someone else's Secret under the name.
	createServer(t, "vm-4", nil)
	createSecret(t, nsAll, "vm-4-ignition", ignitionJSON)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsAll, Name: "vm-4-discovery-boot-media"},
		Data: map[string][]byte{"x": []byte("theirs")}}
	require.NoError(t, k8s.Create(ctx, theirs))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), theirs) })
	createVMSBC(t, "vm-4-discovery", "vm-4", "vm-4-ignition")
	c := waitFor(t, nsAll, "vm-4-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonBootMediaSecretConflict)
	assert.Contains(t, c.Message, "vm-4-discovery-boot-media")
	assert.Nil(t, getSBC(t, nsAll, "vm-4-discovery").Status.BootMediaSecretRef)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(theirs), theirs))
	assert.Equal(t, map[string][]byte{"x": []byte("theirs")}, theirs.Data, "not overwritten")
	require.NoError(t, k8s.Delete(ctx, theirs))
	waitFor(t, nsAll, "vm-4-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

// Without the template ISO, virtual-media boots are not Ready (the message names the files);
// PXE boots are not affected. The template put back is loaded again.
func TestVirtualMediaWithoutTheTemplate(t *testing.T) {
	readyVMBoot(t, "vm-5")
	aside := t.TempDir()
	iso := filepath.Join(probeDir, bootmedia.ISOFile)
	require.NoError(t, os.Rename(iso, filepath.Join(aside, bootmedia.ISOFile)))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			require.NoError(t, os.Rename(filepath.Join(aside, bootmedia.ISOFile), iso))
		}
	}
	defer restore()

	c := waitFor(t, nsAll, "vm-5-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonArtifactMissing)
	assert.Contains(t, c.Message, "probe.iso")
	assert.Contains(t, c.Message, "make probe-image")
	readyBoot(t, "vm-5-pxe", "52:54:00:dd:00:05")

	restore()
	waitFor(t, nsAll, "vm-5-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

// An ignition that does not fit the ISO's embed area is not Ready, with a reason that says so.
func TestIgnitionTooLargeForTheISO(t *testing.T) {
	big := make([]byte, isoEmbedSize+1024)
	_, err := rand.Read(big) // incompressible
	require.NoError(t, err)
	createServer(t, "vm-6", nil)
	createSecret(t, nsAll, "vm-6-ignition", big)
	createVMSBC(t, "vm-6-discovery", "vm-6", "vm-6-ignition")
	c := waitFor(t, nsAll, "vm-6-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonIgnitionTooLarge)
	assert.Contains(t, c.Message, "does not fit")
}

// An ignition larger than the probe's /init accepts (ignition.MaxIgnitionBytes, uncompressed)
// is not Ready either, though it fits the embed area compressed. At the limit it is Ready; over
// it, a Secret cannot hold it today (the API server's limit is the same 1 MiB), so the check is
// called directly, as the reconciler calls it with the Secret's data.
func TestIgnitionTooLargeForTheProbe(t *testing.T) {
	padded := func(n int) []byte {
		head := `{"registryURL":"https://registry.test","token":"probe-secret-token","systemUUID":"x","mode":"discovery","pad":"`
		data := []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
		require.Len(t, data, n)
		return data
	}
	createServer(t, "vm-8", nil)
	createSecret(t, nsAll, "vm-8-ignition", padded(ignition.MaxIgnitionBytes))
	createVMSBC(t, "vm-8-discovery", "vm-8", "vm-8-ignition")
	waitFor(t, nsAll, "vm-8-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)

	sbc := getSBC(t, nsAll, "vm-8-discovery")
	ready, _, _ := svc.CheckMedia(sbc, padded(ignition.MaxIgnitionBytes))
	assert.True(t, ready, "at the limit")
	ready, reason, message := svc.CheckMedia(sbc, padded(ignition.MaxIgnitionBytes+1))
	assert.False(t, ready, "over the limit, though it compresses to a few KiB")
	assert.Equal(t, metalv1alpha1.ReasonIgnitionTooLarge, reason)
	assert.Contains(t, message, fmt.Sprintf("(%d bytes) is larger than the probe accepts (%d bytes", ignition.MaxIgnitionBytes+1, ignition.MaxIgnitionBytes))
	assert.Contains(t, message, "vm-8-ignition")
}

// The media listener serves the same handler: the ISO as the BMCs fetch it.
func TestServeOnTheMediaListener(t *testing.T) {
	isoURL := readyVMBoot(t, "vm-7")
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mediaL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, boot.Listeners{HTTP: httpL, Media: mediaL}) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(wait):
			t.Error("Serve did not return")
		}
	}()
	at, _ := isoAt(t, "http://"+mediaL.Addr().String(), isoURL)
	resp, iso := fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Len(t, iso, isoSize)
	at, _ = isoAt(t, "http://"+httpL.Addr().String(), isoURL)
	resp, _ = fetch(t, http.MethodHead, at, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A boot by URI (bootMethod UefiHttp) publishes its ISO's URL on the public URL, where the
// server's firmware reaches the service (not the BMCs' media URL), served with UEFI's ISO
// Content-Type; the host's HEAD then GET are both served, and bind the boot to it: another
// address is refused and ends the boot.
func TestURIBootServesItsISOToTheHost(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	createServer(t, "uri-1", nil, "52:54:00:ee:00:31") // its DHCP is ours: it must know the NIC
	createSecret(t, nsAll, "uri-1-ignition", ignitionJSON)
	createVMSBC(t, "uri-1-discovery", "uri-1", "uri-1-ignition")
	// The service may have written its status meanwhile: updated as it is now.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sbc := getSBC(t, nsAll, "uri-1-discovery")
		sbc.Spec.BootMethod = metalv1alpha1.BootMethodUefiHttp
		return k8s.Update(context.Background(), sbc)
	}))
	waitFor(t, nsAll, "uri-1-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	isoURL := mediaURLOf(t, "uri-1-discovery")
	assert.True(t, strings.HasPrefix(isoURL, publicURL+"/boot/"), "on the public URL: %s", isoURL)
	assert.True(t, strings.HasSuffix(isoURL, "/"+boot.MediaFile), isoURL)
	ready := getSBC(t, nsAll, "uri-1-discovery").Status.Conditions[0]
	assert.Contains(t, ready.Message, "UEFI HTTP boot")
	at, token := isoAt(t, srv.URL, isoURL)
	assert.NotContains(t, ready.Message, token)

	host, attacker := from(hostAddr), from(attackerAddr)
	req, err := http.NewRequest(http.MethodHead, at, nil)
	require.NoError(t, err)
	resp, err := host.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, boot.URIMediaContentType, resp.Header.Get("Content-Type"), "UEFI HTTP boot takes it as an ISO")
	assert.Equal(t, "application/vnd.efi-iso", boot.URIMediaContentType)
	code, _ := getFrom(t, host, at)
	require.Equal(t, http.StatusOK, code, "HEAD, then GET, from the host")
	rec := getSBC(t, nsAll, "uri-1-discovery").Status.Secrets
	require.NotNil(t, rec)
	assert.Equal(t, hostAddr, rec.HostAddress, "bound to the host that fetched it")
	assert.Equal(t, hostAddr, rec.IgnitionServedTo)

	code, body := getFrom(t, attacker, at)
	assert.Equal(t, http.StatusForbidden, code)
	assert.NotContains(t, body, "probe-secret-token")
	waitFor(t, nsAll, "uri-1-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonBootEnded)
}
