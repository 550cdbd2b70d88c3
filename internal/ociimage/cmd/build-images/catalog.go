package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/ironfleet/ironfleet/internal/ociimage"
)

// catalogSpec renders the bundle into a file-based catalog with opm, written to <out>/fbc/ for
// people to read, and makes the catalog image that serves it (ociimage.CatalogSpec).
func catalogSpec(o options) (ociimage.Spec, error) {
	for flagName, v := range map[string]string{"-catalog-ref": o.catalog, "-bundle-ref": o.bundle, "-opm": o.opm, "-grpc-health-probe": o.grpcHealthProbe} {
		if err := required(flagName, v); err != nil {
			return ociimage.Spec{}, err
		}
	}
	// The catalog names the bundle image by digest when make images built it: OLM pulls an image
	// named by a tag again at every unpack, one named by digest only when it lacks it.
	bundleRef, err := pinnedRef(o.out, "bundle", o.bundle)
	if err != nil {
		return ociimage.Spec{}, err
	}
	return ociimage.CatalogSpec(ociimage.Catalog{Ref: o.catalog, Bundles: []ociimage.CatalogBundle{{Dir: o.bundleDir, Ref: bundleRef}},
		OPM: o.opm, GRPCHealthProbe: o.grpcHealthProbe, Dir: filepath.Join(o.out, "fbc"), Files: users(), User: nonRoot + ":" + nonRoot})
}

// pinnedRef is ref by the digest images.json in dir records for image, when it records ref;
// else ref as it is.
func pinnedRef(dir, image, ref string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "images.json"))
	if err != nil {
		return ref, nil //nolint:nilerr // nothing built yet: the reference as given
	}
	var written map[string]ociimage.Written
	if err := json.Unmarshal(data, &written); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(dir, "images.json"), err)
	}
	w, ok := written[image]
	if !ok || w.Ref != ref {
		return ref, nil
	}
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	return parsed.Context().Name() + "@" + w.Digest, nil
}
