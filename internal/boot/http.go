package boot

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/internal/identity"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// Kinds of HTTP traffic and errors, as metric labels.
const (
	kindScript   = "script"
	kindArtifact = "artifact"
	kindIgnition = "ignition"

	errNotFound   = "not_found"
	errBadRequest = "bad_request"
	errTooLarge   = "too_large"
	errForbidden  = "forbidden"
	errBadGateway = "bad_gateway"
	errInternal   = "internal"
)

// requestTimeout bounds the API reads behind one request; a booting host retries.
const requestTimeout = 10 * time.Second

// Handler is the boot service's HTTP side: iPXE scripts, the probe's kernel and initramfs,
// each boot's ignition (at /ignition/<boot id>, once, to the host the boot is bound to:
// secrets.go), and its progress and (virtual-media boots) ISO under the per-boot URL, whose
// token reaches the host only inside the ignition or the ISO; and the firmware images asked of
// it for BMCs, each under a URL of its own (firmware.go).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ipxe/{mac}", s.serveScriptByMAC)
	mux.HandleFunc("GET /ipxe", s.serveScriptByUUID)
	mux.HandleFunc("GET /artifacts/{name}", s.serveArtifact)
	mux.HandleFunc("GET "+loadersPath+"{name}", s.serveLoader)
	mux.HandleFunc("GET "+ignition.IgnitionPathPrefix+"{id}", s.serveIgnition)
	mux.HandleFunc("POST /boot/{token}/progress", s.recordProgress)
	mux.HandleFunc("GET /boot/{token}/"+MediaFile, s.serveMedia)         // and HEAD
	mux.HandleFunc("GET "+FirmwarePathPrefix+"{token}", s.serveFirmware) // and HEAD

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		mux.ServeHTTP(sw, r)
		if kind := errorKind(sw.status); kind != "" {
			httpErrors.WithLabelValues(kind).Inc()
		}
	})
}

// fail answers with an error status; the handler counts it by kind.
func (s *Service) fail(w http.ResponseWriter, code int, _ string) {
	http.Error(w, http.StatusText(code), code)
}

// errorKind is the metric label of an error status ("" for success).
func errorKind(status int) string {
	switch {
	case status < 400:
		return ""
	case status == http.StatusNotFound:
		return errNotFound
	case status == http.StatusForbidden:
		return errForbidden
	case status == http.StatusRequestEntityTooLarge:
		return errTooLarge
	case status == http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case status < 500:
		return errBadRequest
	case status == http.StatusBadGateway:
		return errBadGateway
	}
	return errInternal
}

// statusWriter remembers the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (s *Service) serveScriptByMAC(w http.ResponseWriter, r *http.Request) {
	mac, err := net.ParseMAC(r.PathValue("mac"))
	if err != nil || len(mac) != 6 {
		s.fail(w, http.StatusBadRequest, errBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	t, err := s.targetByMAC(ctx, mac)
	if err != nil {
		s.log.Error(err, "finding the boot of a MAC", "mac", mac.String())
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	s.serveScript(ctx, w, r, t, mac.String(), bootIfOf(mac))
}

// serveScriptByUUID serves a host whose iPXE chains by SMBIOS UUID (?uuid=${uuid}). A UUID
// that cannot identify a machine (identity.Usable: none, all zeros or F, a vendor placeholder)
// says nothing about which host this is: refused, as is one several Servers have (the host then
// has to chain by MAC).
func (s *Service) serveScriptByUUID(w http.ResponseWriter, r *http.Request) {
	uuid := identity.Normalize(r.URL.Query().Get("uuid"))
	if !identity.Usable(uuid) {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	t, err := s.targetByUUID(ctx, uuid)
	if errors.Is(err, errSharedUUID) {
		s.log.Info("refused to boot a host by a UUID several servers have; it must chain by MAC", "uuid", uuid)
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	if err != nil {
		s.log.Error(err, "finding the boot of a UUID", "uuid", uuid)
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	// The NIC is not known from a UUID: iPXE fills in the one it booted from.
	s.serveScript(ctx, w, r, t, "uuid "+uuid, "01-${netX/mac:hexhyp}")
}

// serveScript answers iPXE with the boot of t, or, for a host with nothing to boot, a script
// that says so on its console and exits: iPXE then hands back to the firmware, which boots the
// next device (the disk) instead of retrying forever.
//
// The script holds no secret: anyone who knows a MAC may ask for it. It names the boot's
// ignition URL by the boot's public id; what protects the ignition is that it goes once, to the
// host the boot is bound to (admit), and the script's fetch is one that binds it.
func (s *Service) serveScript(ctx context.Context, w http.ResponseWriter, r *http.Request, t *target, who, bootIf string) {
	var body string
	if t == nil {
		body = fmt.Sprintf("#!ipxe\necho Ironfleet boot service: no Ready boot configuration for %s; booting the next device\nexit 1\n", who)
	} else {
		fresh, err := s.bootByID(ctx, s.tokens.id(t.sbc))
		if err != nil {
			s.log.Error(err, "reading a boot", "bootConfiguration", t.sbc.Name)
			s.fail(w, http.StatusInternalServerError, errInternal)
			return
		}
		if fresh == nil {
			s.fail(w, http.StatusNotFound, errNotFound)
			return
		}
		if !s.admit(ctx, w, r, fresh, fetchScript) {
			return
		}
		base := s.cfg.PublicURL
		body = fmt.Sprintf("#!ipxe\nkernel %s/artifacts/%s initrd=%s %s\ninitrd %s/artifacts/%s\nboot\n",
			base, ArtifactKernel, ArtifactInitramfs, s.probeKernelArgs(fresh, bootIf), base, ArtifactInitramfs)
		s.events.Eventf(fresh.sbc, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonScriptServed, "Boot", "iPXE script served to %s for server %s", who, t.server.Name)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	n, _ := io.WriteString(w, body)
	httpBytes.WithLabelValues(kindScript).Add(float64(n))
}

// loadersPath is where UEFI HTTP boot clients fetch iPXE (the URL DHCP gives them).
const loadersPath = "/loaders/"

// serveArtifact serves the probe's kernel and initramfs (Range requests included: firmware
// HTTP clients resume).
func (s *Service) serveArtifact(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name != ArtifactKernel && name != ArtifactInitramfs {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	s.serveFile(w, r, s.cfg.ProbeDir, name)
}

// serveLoader serves the EFI iPXE binaries to UEFI HTTP boot clients, as TFTP serves them to
// PXE ROMs.
func (s *Service) serveLoader(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name != dhcp.FileEFISNPOnly && name != dhcp.FileEFI {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	s.serveFile(w, r, s.cfg.IPXEDir, name)
}

// serveFile serves the regular file name of dir, whose name the caller checked.
func (s *Service) serveFile(w http.ResponseWriter, r *http.Request, dir, name string) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		s.log.Info("artifact missing", "file", name, "error", err.Error())
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	cw := &countingWriter{ResponseWriter: w}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(cw, r, name, st.ModTime(), f)
	httpBytes.WithLabelValues(kindArtifact).Add(float64(cw.n))
}

// serveIgnition serves the boot's ignition, read from its Secret now (not from a cache): the
// operator may have re-rendered it for this boot a moment ago. It goes once, to the host the
// boot is bound to (admit), with the boot URL (its token: where the host reports progress)
// added to it.
func (s *Service) serveIgnition(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	t, err := s.bootByID(ctx, r.PathValue("id"))
	if err != nil {
		s.log.Error(err, "resolving an ignition URL")
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	if t == nil {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	data, ok := s.ignitionData(ctx, w, t)
	if !ok {
		return
	}
	data, err = ignition.WithBootURL(data, s.bootURL(s.tokens.token(t.sbc)))
	if err != nil {
		s.log.Error(err, "adding the boot URL to an ignition", "bootConfiguration", t.sbc.Name)
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	// Recorded before a byte is sent: a second fetch, here or at another replica, is refused.
	if !s.admit(ctx, w, r, t, fetchIgnition) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	n, _ := w.Write(data)
	httpBytes.WithLabelValues(kindIgnition).Add(float64(n))
	bootsServed.WithLabelValues(string(t.sbc.Spec.Purpose)).Inc()
	s.events.Eventf(t.sbc, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonIgnitionServed, "Boot", "ignition served to server %s", t.server.Name)
}

// ignitionData reads a boot's ignition from its Secret, from the API server; it answers 404
// itself when there is none (500 when the API cannot be read).
func (s *Service) ignitionData(ctx context.Context, w http.ResponseWriter, t *target) ([]byte, bool) {
	ref := t.sbc.Spec.IgnitionSecretRef
	if ref == nil {
		s.fail(w, http.StatusNotFound, errNotFound)
		return nil, false
	}
	var secret corev1.Secret
	if err := s.api.Get(ctx, client.ObjectKey{Namespace: t.sbc.Namespace, Name: ref.Name}, &secret); err != nil {
		if client.IgnoreNotFound(err) != nil {
			s.log.Error(err, "reading an ignition Secret", "bootConfiguration", t.sbc.Name)
			s.fail(w, http.StatusInternalServerError, errInternal)
			return nil, false
		}
		s.fail(w, http.StatusNotFound, errNotFound)
		return nil, false
	}
	data := secret.Data[ignition.SecretKey]
	if len(data) == 0 {
		s.fail(w, http.StatusNotFound, errNotFound)
		return nil, false
	}
	return data, true
}

// recordProgress records a stage the booted host reports: as the BootProgress condition of its
// boot configuration, and as an event on it.
func (s *Service) recordProgress(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	token := r.PathValue("token")
	t, ok := s.resolveBoot(ctx, w, token)
	if !ok {
		return
	}
	p, code, kind := decodeProgress(w, r)
	if code != 0 {
		s.fail(w, code, kind)
		return
	}
	// The message is the host's; the token must not end up in the API even if the host echoes it.
	p.Message = strings.ReplaceAll(p.Message, token, "[boot token]")
	if err := s.setProgress(ctx, client.ObjectKeyFromObject(t.sbc), p); err != nil {
		s.log.Error(err, "recording boot progress", "bootConfiguration", t.sbc.Name, "stage", p.Stage)
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	eventType := corev1.EventTypeNormal
	if failedStage(p.Stage) {
		eventType = corev1.EventTypeWarning
	}
	s.events.Eventf(t.sbc, nil, eventType, string(p.Stage), "Boot", "%s", progressNote(p))
	w.WriteHeader(http.StatusNoContent)
}

// decodeProgress reads a Progress strictly: at most MaxProgressBytes, one JSON object with no
// unknown fields, valid. It returns an HTTP status and error kind when the body is refused.
func decodeProgress(w http.ResponseWriter, r *http.Request) (ignition.Progress, int, string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, ignition.MaxProgressBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return ignition.Progress{}, http.StatusRequestEntityTooLarge, errTooLarge
	}
	if err != nil {
		return ignition.Progress{}, http.StatusBadRequest, errBadRequest
	}
	var p ignition.Progress
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() || p.Validate() != nil {
		return ignition.Progress{}, http.StatusBadRequest, errBadRequest
	}
	if _, err := dec.Token(); err != io.EOF {
		return ignition.Progress{}, http.StatusBadRequest, errBadRequest
	}
	return p, 0, ""
}

func failedStage(s ignition.Stage) bool {
	return s == ignition.StageFailed || s == ignition.StageRegistryUnreachable
}

func progressNote(p ignition.Progress) string {
	if p.Message == "" {
		return "the host reports " + string(p.Stage)
	}
	return p.Message
}

// setProgress writes the BootProgress condition on the configuration as it is now, retrying
// on conflict: the reconciler writes Ready on the same list.
func (s *Service) setProgress(ctx context.Context, key client.ObjectKey, p ignition.Progress) error {
	status := metav1.ConditionTrue
	if failedStage(p.Stage) {
		status = metav1.ConditionFalse
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sbc metalv1alpha1.ServerBootConfiguration
		if err := s.api.Get(ctx, key, &sbc); err != nil {
			return err
		}
		updated := sbc.DeepCopy()
		meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{
			Type: metalv1alpha1.ConditionBootProgress, Status: status, Reason: string(p.Stage), Message: p.Message,
			ObservedGeneration: sbc.Generation,
		})
		// A repeated stage is still news (a new attempt): the transition time is moved on.
		if c := meta.FindStatusCondition(updated.Status.Conditions, metalv1alpha1.ConditionBootProgress); c != nil {
			c.LastTransitionTime = metav1.Now()
		}
		return s.client.Status().Patch(ctx, updated, client.MergeFromWithOptions(&sbc, client.MergeFromWithOptimisticLock{}))
	})
}

// resolveBoot finds the Ready boot a token names; it answers 404 itself when there is none.
func (s *Service) resolveBoot(ctx context.Context, w http.ResponseWriter, token string) (*target, bool) {
	t, err := s.bootByToken(ctx, token)
	if err != nil {
		s.log.Error(err, "resolving a boot URL")
		s.fail(w, http.StatusInternalServerError, errInternal)
		return nil, false
	}
	if t == nil || subtle.ConstantTimeCompare([]byte(s.tokens.token(t.sbc)), []byte(token)) != 1 {
		s.fail(w, http.StatusNotFound, errNotFound)
		return nil, false
	}
	return t, true
}

// countingWriter counts the body bytes written.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}
