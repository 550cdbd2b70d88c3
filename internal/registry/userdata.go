package registry

import (
	"context"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// The claim's user data (its ignition: for a Cluster API machine, a kubeadm join token) is never
// in the probe's ignition, which the boot service serves over plain HTTP and embeds in the
// boot's ISO: the probe of an install boot asks the registry for it, over TLS, with its boot's
// token. Only the token of the server's current boot is taken (decodeAndAuthorize), and only
// when that boot is the server's install boot, for the claim that holds the server now: a
// discovery or cleanup probe's token, or one of an install that is over, gets 403.

// UserDataRequest is the body of a user data request: the SMBIOS UUID the probe read, checked
// against the Server's only when that is the Server's identity, as for reports.
type UserDataRequest struct {
	SystemUUID string `json:"systemUUID,omitempty"`
}

// postUserData answers the probe of a server's current install boot with the claim's user data,
// byte for byte (application/octet-stream); 204 when the claim has none.
func (s *Server) postUserData(w http.ResponseWriter, r *http.Request) {
	var req UserDataRequest
	auth := s.decodeAndAuthorize(w, r, &req, func() about { return about{systemUUID: req.SystemUUID} })
	if auth == nil {
		return
	}
	ctx := r.Context()
	server := auth.server
	if !s.installBoot(ctx, w, server.Name, auth.boot) {
		return
	}
	ref := server.Spec.ServerClaimRef
	if ref == nil {
		s.Log.Info("refused user data: the server is not claimed", "server", server.Name, "boot", auth.boot)
		writeError(w, http.StatusForbidden, "server %s is held by no claim", server.Name)
		return
	}
	var claim metalv1alpha1.ServerClaim
	switch err := s.reader().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &claim); {
	case apierrors.IsNotFound(err):
		writeError(w, http.StatusForbidden, "the claim of server %s is gone", server.Name)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "reading the claim of server %s: %v", server.Name, err)
		return
	}
	if !ref.Names(&claim) {
		writeError(w, http.StatusForbidden, "the claim of server %s is gone", server.Name)
		return
	}
	secretRef := claim.Spec.IgnitionSecretRef
	if secretRef == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// Secrets are not cached: read from the API.
	var secret corev1.Secret
	switch err := s.reader().Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: secretRef.Name}, &secret); {
	case apierrors.IsNotFound(err):
		writeError(w, http.StatusNotFound, "the claim's ignition Secret %s does not exist", secretRef.Name)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "reading the claim's ignition Secret: %v", err)
		return
	}
	data, ok := secret.Data[metalv1alpha1.IgnitionSecretKey]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "the claim's ignition Secret %s has no %q key", secretRef.Name, metalv1alpha1.IgnitionSecretKey)
		return
	case len(data) > metalv1alpha1.MaxUserDataBytes:
		writeError(w, http.StatusConflict, "the claim's ignition is %d bytes, more than %d", len(data), metalv1alpha1.MaxUserDataBytes)
		return
	}
	s.Log.Info("handed the claim's user data to its install probe", "server", server.Name, "boot", auth.boot,
		"claim", claim.Namespace+"/"+claim.Name, "bytes", len(data))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// installBoot says whether boot, the server's current probe boot, is its install boot: the
// server's install boot configuration in the probe namespace names it. It writes the refusal
// itself. Read from the API: the cache may be behind the configuration's creation.
func (s *Server) installBoot(ctx context.Context, w http.ResponseWriter, server, boot string) bool {
	if s.ProbeNamespace == "" {
		writeError(w, http.StatusNotFound, "this registry hands out no user data")
		return false
	}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := s.reader().Get(ctx, client.ObjectKey{Namespace: s.ProbeNamespace, Name: probeboot.Name(server, metalv1alpha1.BootPurposeProvisioning)}, &sbc)
	if client.IgnoreNotFound(err) != nil {
		writeError(w, http.StatusServiceUnavailable, "reading the install boot of server %s: %v", server, err)
		return false
	}
	if err != nil || sbc.Annotations[metalv1alpha1.AnnotationProbeBoot] != boot ||
		sbc.Spec.Purpose != metalv1alpha1.BootPurposeProvisioning || sbc.Spec.ServerRef.Name != server || !sbc.DeletionTimestamp.IsZero() {
		s.Log.Info("refused user data: the token is not for an install boot", "server", server, "boot", boot)
		writeError(w, http.StatusForbidden, "the token is not for an install boot of server %s", server)
		return false
	}
	return true
}

// reader reads around the cache when it can.
func (s *Server) reader() client.Reader {
	if s.APIReader != nil {
		return s.APIReader
	}
	return s.Client
}
