package ociimage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The bundle annotations a catalog is made from.
const (
	AnnotationPackage        = "operators.operatorframework.io.bundle.package.v1"
	annotationChannels       = "operators.operatorframework.io.bundle.channels.v1"
	annotationDefaultChannel = "operators.operatorframework.io.bundle.channel.default.v1"
)

// BundleAnnotations are an OLM bundle's metadata: its package, channels, media type.
func BundleAnnotations(bundleDir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(data, &meta); err != nil {
		return nil, fmt.Errorf("bundle metadata: %w", err)
	}
	return meta.Annotations, nil
}

// BundleSpec is an OLM bundle's image: its manifests and metadata, labelled with the metadata's
// annotations (as operator-sdk's bundle.Dockerfile would).
func BundleSpec(bundleDir, ref string) (Spec, error) {
	annotations, err := BundleAnnotations(bundleDir)
	if err != nil {
		return Spec{}, err
	}
	var files []File
	for _, sub := range []string{"manifests", "metadata"} {
		tree, err := Tree(filepath.Join(bundleDir, sub), "/"+sub)
		if err != nil {
			return Spec{}, err
		}
		files = append(files, tree...)
	}
	return Spec{Ref: ref, Files: files, Labels: annotations}, nil
}

// CatalogBundle is one bundle of a catalog: its directory, and its image's reference.
type CatalogBundle struct{ Dir, Ref string }

// Catalog is a file-based catalog of one package and the image that serves it.
type Catalog struct {
	// Ref is the catalog image's reference.
	Ref string
	// Bundles are the package's bundles, oldest first: each replaces the one before it in every
	// channel of the newest one's metadata.
	Bundles []CatalogBundle
	// OPM and GRPCHealthProbe are static opm and grpc_health_probe binaries.
	OPM, GRPCHealthProbe string
	// Dir is where the catalog is written (emptied first), for people to read.
	Dir string
	// Files go into the image besides the catalog and the binaries (users).
	Files []File
	// User the image runs as.
	User string
}

// CatalogSpec renders each bundle with opm (naming its image), adds the package and its
// channels, checks the catalog with opm validate, writes it to c.Dir, and returns the catalog
// image: opm serving it on :50051, as OLM's grpc CatalogSources expect, with grpc_health_probe,
// which OLM probes its catalog pods with.
func CatalogSpec(c Catalog) (Spec, error) {
	if len(c.Bundles) == 0 {
		return Spec{}, fmt.Errorf("a catalog needs a bundle")
	}
	annotations, err := BundleAnnotations(c.Bundles[len(c.Bundles)-1].Dir)
	if err != nil {
		return Spec{}, err
	}
	pkg, def := annotations[AnnotationPackage], annotations[annotationDefaultChannel]
	if pkg == "" || def == "" {
		return Spec{}, fmt.Errorf("bundle metadata: %s and %s are required", AnnotationPackage, annotationDefaultChannel)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return Spec{}, err
	}
	dir := filepath.Join(c.Dir, pkg)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Spec{}, err
	}
	packageYAML, err := opm(c.OPM, "init", pkg, "--default-channel="+def, "--output=yaml")
	if err != nil {
		return Spec{}, err
	}
	var bundlesYAML bytes.Buffer
	var entries []map[string]string
	for i, b := range c.Bundles {
		rendered, err := opm(c.OPM, "render", b.Dir, "--alpha-image-ref-template="+b.Ref, "--output=yaml")
		if err != nil {
			return Spec{}, err
		}
		var bundle struct{ Schema, Name, Image string }
		if err := yaml.Unmarshal(rendered, &bundle); err != nil || bundle.Schema != "olm.bundle" || bundle.Name == "" {
			return Spec{}, fmt.Errorf("opm render gave no bundle (%v): %s", err, rendered)
		}
		if bundle.Image != b.Ref {
			return Spec{}, fmt.Errorf("opm render named the bundle image %q, not %q", bundle.Image, b.Ref)
		}
		if !bytes.HasPrefix(rendered, []byte("---")) {
			bundlesYAML.WriteString("---\n")
		}
		bundlesYAML.Write(rendered)
		entry := map[string]string{"name": bundle.Name}
		if i > 0 {
			entry["replaces"] = entries[i-1]["name"]
		}
		entries = append(entries, entry)
	}
	var channelYAML bytes.Buffer
	for _, ch := range strings.Split(annotations[annotationChannels], ",") {
		doc, err := yaml.Marshal(map[string]any{"schema": "olm.channel", "package": pkg, "name": strings.TrimSpace(ch), "entries": entries})
		if err != nil {
			return Spec{}, err
		}
		channelYAML.WriteString("---\n")
		channelYAML.Write(doc)
	}
	for name, data := range map[string][]byte{"package.yaml": packageYAML, "bundle.yaml": bundlesYAML.Bytes(), "channels.yaml": channelYAML.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return Spec{}, err
		}
	}
	if _, err := opm(c.OPM, "validate", c.Dir); err != nil {
		return Spec{}, err
	}
	files, err := Tree(c.Dir, "/configs")
	if err != nil {
		return Spec{}, err
	}
	files = append(files,
		File{Path: "/bin/opm", Source: c.OPM, Mode: 0o755},
		File{Path: "/bin/grpc_health_probe", Source: c.GRPCHealthProbe, Mode: 0o755},
		// opm serve keeps its cache in a temporary directory.
		File{Path: "/tmp", Dir: true, Mode: 0o1777},
	)
	files = append(files, c.Files...)
	return Spec{Ref: c.Ref, Files: files, User: c.User,
		Entrypoint: []string{"/bin/opm"}, Cmd: []string{"serve", "/configs"}, ExposedPorts: []string{"50051/tcp"},
		Labels: map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}}, nil
}

// opm runs opm and returns what it printed.
func opm(bin string, args ...string) ([]byte, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("opm %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes(), nil
}
