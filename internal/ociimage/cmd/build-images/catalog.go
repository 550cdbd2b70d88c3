package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/ironfleet/ironfleet/internal/ociimage"
)

// The bundle annotations a catalog is made from.
const (
	annotationPackage        = "operators.operatorframework.io.bundle.package.v1"
	annotationChannels       = "operators.operatorframework.io.bundle.channels.v1"
	annotationDefaultChannel = "operators.operatorframework.io.bundle.channel.default.v1"
)

// catalogSpec renders the bundle into a file-based catalog with opm (the package, the bundle
// naming the bundle image, and each channel of the bundle's metadata with the bundle as its
// head), checks it with opm validate, writes it to <out>/fbc/ for people to read, and makes
// the catalog image: opm serving it on :50051, as OLM's grpc CatalogSources expect.
func catalogSpec(o options, tmp string) (ociimage.Spec, error) {
	for flagName, v := range map[string]string{"-catalog-ref": o.catalog, "-bundle-ref": o.bundle, "-opm": o.opm, "-grpc-health-probe": o.grpcHealthProbe} {
		if err := required(flagName, v); err != nil {
			return ociimage.Spec{}, err
		}
	}
	annotations, err := bundleAnnotations(o.bundleDir)
	if err != nil {
		return ociimage.Spec{}, err
	}
	pkg, channels, def := annotations[annotationPackage], strings.Split(annotations[annotationChannels], ","), annotations[annotationDefaultChannel]
	if pkg == "" || def == "" {
		return ociimage.Spec{}, fmt.Errorf("bundle metadata: %s and %s are required", annotationPackage, annotationDefaultChannel)
	}
	root := filepath.Join(o.out, "fbc")
	if err := os.RemoveAll(root); err != nil {
		return ociimage.Spec{}, err
	}
	dir := filepath.Join(root, pkg)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ociimage.Spec{}, err
	}
	packageYAML, err := opm(o, "init", pkg, "--default-channel="+def, "--output=yaml")
	if err != nil {
		return ociimage.Spec{}, err
	}
	// The catalog names the bundle image by digest when make images built it: OLM pulls an image
	// named by a tag again at every unpack, one named by digest only when it lacks it.
	bundleRef, err := pinnedRef(o.out, "bundle", o.bundle)
	if err != nil {
		return ociimage.Spec{}, err
	}
	bundleYAML, err := opm(o, "render", o.bundleDir, "--alpha-image-ref-template="+bundleRef, "--output=yaml")
	if err != nil {
		return ociimage.Spec{}, err
	}
	var bundle struct {
		Schema, Name, Image string
	}
	if err := yaml.Unmarshal(bundleYAML, &bundle); err != nil || bundle.Schema != "olm.bundle" || bundle.Name == "" {
		return ociimage.Spec{}, fmt.Errorf("opm render gave no bundle (%v): %s", err, bundleYAML)
	}
	if bundle.Image != bundleRef {
		return ociimage.Spec{}, fmt.Errorf("opm render named the bundle image %q, not %q", bundle.Image, bundleRef)
	}
	var channelYAML bytes.Buffer
	for _, ch := range channels {
		doc, err := yaml.Marshal(map[string]any{"schema": "olm.channel", "package": pkg, "name": strings.TrimSpace(ch),
			"entries": []map[string]string{{"name": bundle.Name}}})
		if err != nil {
			return ociimage.Spec{}, err
		}
		channelYAML.WriteString("---\n")
		channelYAML.Write(doc)
	}
	for name, data := range map[string][]byte{"package.yaml": packageYAML, "bundle.yaml": bundleYAML, "channels.yaml": channelYAML.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return ociimage.Spec{}, err
		}
	}
	if _, err := opm(o, "validate", root); err != nil {
		return ociimage.Spec{}, err
	}
	files, err := ociimage.Tree(root, "/configs")
	if err != nil {
		return ociimage.Spec{}, err
	}
	files = append(files,
		ociimage.File{Path: "/bin/opm", Source: o.opm, Mode: 0o755},
		ociimage.File{Path: "/bin/grpc_health_probe", Source: o.grpcHealthProbe, Mode: 0o755},
		// opm serve keeps its cache in a temporary directory.
		ociimage.File{Path: "/tmp", Dir: true, Mode: 0o1777},
	)
	files = append(files, users()...)
	return ociimage.Spec{Ref: o.catalog, Files: files, User: nonRoot + ":" + nonRoot,
		Entrypoint: []string{"/bin/opm"}, Cmd: []string{"serve", "/configs"}, ExposedPorts: []string{"50051/tcp"},
		Labels: map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}}, nil
}

// opm runs opm and returns what it printed.
func opm(o options, args ...string) ([]byte, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(o.opm, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("opm %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes(), nil
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
