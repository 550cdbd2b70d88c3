package boot

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// Virtual-media boots (spec.bootMethod VirtualMedia): the boot's ISO is served at
// <MediaURL>/boot/<token>/probe.iso (boots by URI, UefiHttp: at <PublicURL>/boot/…), the template ISO of Config.ProbeDir with the boot's embed
// (its ignition and boot URL) in the template's embed area, and its URL is published in a
// Secret the boot configuration owns (MediaSecretName, key MediaURLKey).
const (
	// MediaFile is the last element of a boot's ISO URL: BMCs check for an .iso name.
	MediaFile = "probe.iso"
	// MediaURLKey is the key of the ISO's URL in the boot media Secret, where the manager reads
	// it (probeboot.MediaURL).
	MediaURLKey = metalv1alpha1.BootMediaURLKey
	// MediaSecretSuffix makes the boot media Secret's name from the configuration's.
	MediaSecretSuffix = "-boot-media"
	// MediaContentType is the ISO's Content-Type for BMCs fetching virtual media.
	MediaContentType = "application/x-iso9660-image"
	// URIMediaContentType is the ISO's Content-Type for a boot by URI: UEFI's own (HTTP boot),
	// by which the server's firmware boots it as a virtual CD from a RAM disk.
	URIMediaContentType = "application/vnd.efi-iso"

	kindMedia = "media"

	// mediaCacheSize bounds the rendered embeds kept (each the size of the embed area, about
	// 1 MiB): one per boot in progress, so that a BMC's range reads of one boot are not each
	// rendered again.
	mediaCacheSize = 16
)

// MediaSecretName is the name of the Secret holding the ISO URL of the boot configuration
// named sbc: <sbc>-boot-media, or, when that is longer than a Secret's name may be, a prefix
// of sbc's name and a hash of all of it.
func MediaSecretName(sbc string) string {
	name := sbc + MediaSecretSuffix
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(sbc))
	tail := "-" + hex.EncodeToString(sum[:])[:10] + MediaSecretSuffix
	return sbc[:validation.DNS1123SubdomainMaxLength-len(tail)] + tail
}

// virtualMedia says whether a boot configuration boots from virtual media.
func virtualMedia(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	return sbc.Spec.BootMethod == metalv1alpha1.BootMethodVirtualMedia
}

// uriBoot says whether sbc is a boot by URI (bootMethod UefiHttp): the server's firmware
// fetches the boot's ISO at the URL its BMC set (HttpBootUri), from PublicURL, and boots it
// from a RAM disk; its DHCP gives it an address only.
func uriBoot(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	return sbc.Spec.BootMethod == metalv1alpha1.BootMethodUefiHttp
}

// servesISO says whether the boot is served as its ISO: virtual media, or by URI.
func servesISO(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	return virtualMedia(sbc) || uriBoot(sbc)
}

// bootMedia is the template ISO and the rendered embeds of the boots being served. The
// template is loaded once, and again when its file changes (make probe-image rebuilt it); when
// it cannot be loaded, it is tried again at most once per retry interval.
type bootMedia struct {
	dir   string
	retry time.Duration

	mu     sync.Mutex
	tmpl   *bootmedia.Template
	loaded fileStamp // of the ISO tmpl was loaded from
	err    error
	tried  time.Time

	embeds embedCache
}

// fileStamp tells a file's versions apart.
type fileStamp struct {
	size    int64
	modTime time.Time
}

func newBootMedia(dir string, retry time.Duration) *bootMedia {
	return &bootMedia{dir: dir, retry: retry, embeds: embedCache{max: mediaCacheSize}}
}

// template is the loaded template, or why there is none.
func (m *bootMedia) template() (*bootmedia.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stamp, statErr := m.stamp()
	if m.tmpl != nil && statErr == nil && stamp == m.loaded {
		return m.tmpl, nil
	}
	if m.tmpl != nil || m.tried.IsZero() || time.Since(m.tried) >= m.retry {
		// Renders of another template do not fit this one's boots.
		m.embeds.clear()
		m.tried, m.tmpl, m.loaded = time.Now(), nil, stamp
		m.tmpl, m.err = bootmedia.LoadTemplate(m.dir)
		if m.err == nil && m.tmpl == nil {
			m.err = errors.New("no template")
		}
	}
	return m.tmpl, m.err
}

func (m *bootMedia) stamp() (fileStamp, error) {
	st, err := os.Stat(m.isoPath())
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: st.Size(), modTime: st.ModTime()}, nil
}

// isoPath is the template ISO's file.
func (m *bootMedia) isoPath() string { return filepath.Join(m.dir, bootmedia.ISOFile) }

// embed is one boot's rendered embed and its ETag.
type embed struct {
	data []byte
	etag string
}

// embedCache is a small LRU of rendered embeds, by boot token and the SHA-256 of the ignition
// rendered: a render is found only for the ignition it was made of, so an ignition Secret
// rewritten during a boot gets a new render (and ETag). It holds one render per token, the last
// one made: the renders of an ignition since replaced are of no use.
type embedCache struct {
	max     int
	mu      sync.Mutex
	order   list.List // of *embedEntry, most recent first
	byToken map[string]*list.Element
}

type embedEntry struct {
	token    string
	ignition [sha256.Size]byte
	embed    embed
}

// clear forgets every render.
func (c *embedCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.byToken = nil
}

// drop forgets token's render (its boot is no longer served).
func (c *embedCache) drop(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byToken[token]; ok {
		c.order.Remove(e)
		delete(c.byToken, token)
	}
}

// get is token's render of the ignition whose SHA-256 is sum, if kept.
func (c *embedCache) get(token string, sum [sha256.Size]byte) (embed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byToken[token]
	if !ok || e.Value.(*embedEntry).ignition != sum {
		return embed{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*embedEntry).embed, true
}

// add keeps v, token's render of the ignition whose SHA-256 is sum, unless a render of that
// ignition for token is there already (two first requests of a boot racing), and returns the
// one kept. A render of another ignition for token is replaced.
func (c *embedCache) add(token string, sum [sha256.Size]byte, v embed) embed {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byToken[token]; ok {
		c.order.MoveToFront(e)
		entry := e.Value.(*embedEntry)
		if entry.ignition != sum {
			entry.ignition, entry.embed = sum, v
		}
		return entry.embed
	}
	if c.byToken == nil {
		c.byToken = map[string]*list.Element{}
	}
	c.byToken[token] = c.order.PushFront(&embedEntry{token: token, ignition: sum, embed: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byToken, last.Value.(*embedEntry).token)
	}
	return v
}

// bootURL is a boot's URL as the host reaches it (where the probe reports progress).
func (s *Service) bootURL(token string) string { return s.cfg.PublicURL + "/boot/" + token }

// mediaURL is a boot's ISO URL as who fetches it reaches it: its BMC (MediaURL) for virtual
// media, the host's firmware (PublicURL) for a boot by URI.
func (s *Service) mediaURL(sbc *metalv1alpha1.ServerBootConfiguration, token string) string {
	base := s.cfg.MediaURL
	if uriBoot(sbc) {
		base = s.cfg.PublicURL
	}
	return base + "/boot/" + token + "/" + MediaFile
}

// serveMedia serves a virtual-media boot's ISO (GET and HEAD, Range and If-Range included: BMCs
// read it in ranges, some many times over). The boot is resolved as /ignition resolves it, and
// its ignition read from the Secret as /ignition reads it (from the API server, on every
// request); the embed is rendered from it on the first request for that ignition and kept, so
// every later range of the boot has the same bytes (and ETag) as long as the Secret holds the
// same ignition, and a rewritten one is served from the next request on.
func (s *Service) serveMedia(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	token := r.PathValue("token")
	t, ok := s.resolveBoot(ctx, w, token)
	if !ok {
		return
	}
	if !servesISO(t.sbc) {
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	tmpl, err := s.media.template()
	if err != nil {
		s.log.Info("refused a boot's ISO: the template ISO is not loaded", "bootConfiguration", t.sbc.Name, "error", err.Error())
		s.fail(w, http.StatusNotFound, errNotFound)
		return
	}
	data, ok := s.ignitionData(ctx, w, t)
	if !ok {
		return
	}
	// The ISO holds the ignition: it goes to the first address that asks (the BMC), in as
	// many range reads as it likes, and to no other (secrets.go); booted by URI, to the host
	// the boot is bound to, as its script would.
	kind := fetchMedia
	if uriBoot(t.sbc) {
		kind = fetchURIMedia
	}
	if !s.admit(ctx, w, r, t, kind) {
		return
	}
	ignitionSum := sha256.Sum256(data)
	e, ok := s.media.embeds.get(token, ignitionSum)
	if !ok {
		rendered, err := tmpl.Embed(data, s.bootURL(token))
		if err != nil {
			s.log.Error(err, "rendering a boot's ISO", "bootConfiguration", t.sbc.Name)
			s.fail(w, http.StatusInternalServerError, errInternal)
			return
		}
		sum := sha256.New()
		sum.Write([]byte(tmpl.Manifest.SHA256))
		sum.Write(rendered)
		e = s.media.embeds.add(token, ignitionSum, embed{data: rendered, etag: `"` + hex.EncodeToString(sum.Sum(nil))[:32] + `"`})
		s.events.Eventf(t.sbc, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonBootMediaServed, "Boot", "ISO with the ignition embedded served for server %s", t.server.Name)
	}
	iso, err := tmpl.Open(e.data)
	if err != nil {
		s.log.Error(err, "opening the template ISO", "file", s.media.isoPath())
		s.fail(w, http.StatusInternalServerError, errInternal)
		return
	}
	defer iso.Close()
	contentType := MediaContentType
	if uriBoot(t.sbc) {
		contentType = URIMediaContentType
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("ETag", e.etag)
	w.Header().Set("Cache-Control", "no-store")
	cw := &countingWriter{ResponseWriter: w}
	http.ServeContent(cw, r, MediaFile, time.Time{}, iso)
	httpBytes.WithLabelValues(kindMedia).Add(float64(cw.n))
}

// checkMedia is the part of a virtual-media boot's verdict that is about its ISO: the template
// is loaded (and unchanged on disk since), the ignition is no larger than the probe accepts
// (ignition.MaxIgnitionBytes), and the boot's embed fits the template. The ignition is data,
// from the Secret checkIgnition read.
func (s *Service) checkMedia(sbc *metalv1alpha1.ServerBootConfiguration, data []byte) verdict {
	tmpl, err := s.media.template()
	if err != nil {
		v := notReady(metalv1alpha1.ReasonArtifactMissing, "the template ISO of virtual-media boots (%s and %s in %s, which make probe-image builds) cannot be served: %v",
			bootmedia.ISOFile, bootmedia.ManifestFile, s.cfg.ProbeDir, err)
		v.recheck = s.cfg.RecheckInterval
		return v
	}
	if len(data) > ignition.MaxIgnitionBytes {
		// It may well fit compressed, but the probe's /init would refuse it on the host.
		return notReady(metalv1alpha1.ReasonIgnitionTooLarge, "the ignition in Secret %s/%s (%d bytes) is larger than the probe accepts (%d bytes, uncompressed)",
			sbc.Namespace, sbc.Spec.IgnitionSecretRef.Name, len(data), ignition.MaxIgnitionBytes)
	}
	if _, err := tmpl.Embed(data, s.bootURL(s.tokens.token(sbc))); err != nil {
		if errors.Is(err, bootmedia.ErrTooLarge) {
			return notReady(metalv1alpha1.ReasonIgnitionTooLarge, "the ignition in Secret %s/%s (%d bytes) does not fit the ISO's embed area (%d bytes, compressed)",
				sbc.Namespace, sbc.Spec.IgnitionSecretRef.Name, len(data), tmpl.Manifest.EmbedSize)
		}
		return notReady(metalv1alpha1.ReasonIgnitionTooLarge, "the ignition in Secret %s/%s cannot be embedded in the ISO: %v", sbc.Namespace, sbc.Spec.IgnitionSecretRef.Name, err)
	}
	return verdict{ready: true}
}

// publishMedia creates or updates the Secret holding the boot's ISO URL, owned by the boot
// configuration (its controller reference, without blocking the owner's deletion: that would
// need the finalizers permission, and the URL dies with the configuration anyway). It returns
// the verdict when the Secret's name is another object's.
func (s *Service) publishMedia(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration) (verdict, error) {
	key := client.ObjectKey{Namespace: sbc.Namespace, Name: MediaSecretName(sbc.Name)}
	want := map[string][]byte{MediaURLKey: []byte(s.mediaURL(sbc, s.tokens.token(sbc)))}
	owner := metav1.OwnerReference{APIVersion: metalv1alpha1.GroupVersion.String(), Kind: "ServerBootConfiguration",
		Name: sbc.Name, UID: sbc.UID, Controller: ptr.To(true)}
	published := verdict{ready: true, mediaSecret: key.Name, setMedia: true}

	var secret corev1.Secret
	err := s.client.Get(ctx, key, &secret)
	if apierrors.IsNotFound(err) {
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{owner}},
			Type:       corev1.SecretTypeOpaque, Data: want,
		}
		err = s.client.Create(ctx, &secret)
		if err == nil {
			s.events.Eventf(sbc, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonBootMediaPublished, "Boot", "the ISO's URL is in Secret %s (key %s)", key.Name, MediaURLKey)
			return published, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return verdict{}, fmt.Errorf("creating boot media Secret %s: %w", key.Name, err)
		}
		// The cache had not seen it yet.
		err = s.api.Get(ctx, key, &secret)
	}
	if err != nil {
		return verdict{}, fmt.Errorf("reading boot media Secret %s: %w", key.Name, err)
	}
	// The Secret is this configuration's if its controller is a boot configuration of this
	// name: this one, or one deleted and re-created under the same name (its Secret not yet
	// collected), whose Secret is taken over.
	c := metav1.GetControllerOf(&secret)
	if c == nil || c.Kind != owner.Kind || c.APIVersion != owner.APIVersion || c.Name != sbc.Name {
		v := notReady(metalv1alpha1.ReasonBootMediaSecretConflict, "Secret %s/%s, where this boot's ISO URL goes, exists and is not this boot configuration's (its controller owner is not ServerBootConfiguration %s): delete or rename it",
			key.Namespace, key.Name, sbc.Name)
		v.setMedia = true
		v.recheck = s.cfg.RecheckInterval // a Secret owned by no one is not watched
		return v, nil
	}
	if c.UID == sbc.UID && len(secret.Data) == 1 && string(secret.Data[MediaURLKey]) == string(want[MediaURLKey]) {
		return published, nil
	}
	updated := secret.DeepCopy()
	updated.Data = want
	for i := range updated.OwnerReferences {
		if updated.OwnerReferences[i].Controller != nil && *updated.OwnerReferences[i].Controller {
			updated.OwnerReferences[i] = owner
		}
	}
	if err := s.client.Update(ctx, updated); err != nil {
		return verdict{}, fmt.Errorf("updating boot media Secret %s: %w", key.Name, err)
	}
	s.events.Eventf(sbc, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonBootMediaPublished, "Boot", "the ISO's URL is in Secret %s (key %s)", key.Name, MediaURLKey)
	return published, nil
}
