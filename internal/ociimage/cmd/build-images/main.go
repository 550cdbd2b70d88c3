// Command build-images builds Ironfleet's container images without a container engine
// (internal/ociimage), reproducibly, into -out: each as an OCI image layout and a tar of it,
// and images.json naming each image's reference and digest.
//
//   - manager: the manager, run as a non-root user, with CA certificates.
//   - capi-provider: the Cluster API infrastructure provider (cmd/capi-provider), the same way.
//   - boot-service: the boot service with the iPXE binaries (Debian's ipxe) and the probe's
//     kernel, initramfs and template ISO (make probe-image) inside.
//   - bundle: the OLM bundle (bundle/), labelled with its metadata's annotations.
//   - pause: the pod sandbox image of test/node's containerd (test/node/pause).
//   - olm: OLM's olm and catalog operators, package-server and cpb, built from the pinned
//     module, with a cp
//     (Debian's static busybox) for the copy step of OLM's bundle unpack Job: the install
//     tests run OLM from it.
//   - catalog: a file-based catalog of that bundle, rendered by opm (make catalog), served by
//     opm, with grpc_health_probe for OLM's probes of its catalog pods.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ociimage"
)

// nonRoot is the user the images run as (distroless's "nonroot").
const nonRoot = "65532"

type options struct {
	out, manager, capiProvider, bootService, bundle, catalog, pause, olm string
	olmDir, busybox                                                      string
	probeDir, ipxeDir, bundleDir, caFile                                 string
	images, opm, grpcHealthProbe                                         string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("build-images", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "bin/images", "Directory the images are written to.")
	fs.StringVar(&o.manager, "manager-ref", "", "The manager image's reference (the Makefile's IMG).")
	fs.StringVar(&o.capiProvider, "capi-provider-ref", "", "The Cluster API provider image's reference (CAPI_IMG).")
	fs.StringVar(&o.bootService, "boot-service-ref", "", "The boot service image's reference (BOOT_IMG).")
	fs.StringVar(&o.bundle, "bundle-ref", "", "The bundle image's reference (BUNDLE_IMG); the catalog names it too.")
	fs.StringVar(&o.catalog, "catalog-ref", "", "The catalog image's reference (CATALOG_IMG).")
	fs.StringVar(&o.pause, "pause-ref", "", "The pause image's reference (PAUSE_IMG).")
	fs.StringVar(&o.olm, "olm-ref", "", "The OLM image's reference (OLM_IMG).")
	fs.StringVar(&o.olmDir, "olm-dir", "", "Directory holding OLM's olm, catalog and cpb, static (make olm-tools).")
	fs.StringVar(&o.busybox, "busybox", "/bin/busybox", "A static busybox (Debian's busybox-static): the OLM image's cp.")
	fs.StringVar(&o.opm, "opm", "", "opm (operator-registry), static: renders the catalog and serves it in the catalog image.")
	fs.StringVar(&o.grpcHealthProbe, "grpc-health-probe", "", "grpc_health_probe, static, for the catalog image.")
	fs.StringVar(&o.probeDir, "probe-dir", "bin/probe", "The probe's boot image (make probe-image).")
	fs.StringVar(&o.ipxeDir, "ipxe-dir", "/usr/lib/ipxe", "Directory holding undionly.kpxe, ipxe.efi and snponly.efi (Debian's ipxe package).")
	fs.StringVar(&o.bundleDir, "bundle-dir", "bundle", "The OLM bundle (make bundle).")
	fs.StringVar(&o.caFile, "ca-file", "/etc/ssl/certs/ca-certificates.crt", "The CA certificates the images trust (Debian's ca-certificates).")
	fs.StringVar(&o.images, "images", "manager,capi-provider,boot-service,bundle", "Which images to build (manager, capi-provider, boot-service, bundle, pause, olm, catalog).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "build-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	written := map[string]ociimage.Written{}
	for _, image := range strings.Split(o.images, ",") {
		var spec ociimage.Spec
		switch image {
		case "manager":
			spec, err = managerSpec(o, tmp)
		case "capi-provider":
			spec, err = capiProviderSpec(o, tmp)
		case "boot-service":
			spec, err = bootServiceSpec(o, tmp)
		case "bundle":
			spec, err = bundleSpec(o)
		case "pause":
			spec, err = pauseSpec(o, tmp)
		case "olm":
			spec, err = olmSpec(o)
		case "catalog":
			spec, err = catalogSpec(o)
		default:
			err = fmt.Errorf("-images: no image %q (manager, capi-provider, boot-service, bundle, pause, olm, catalog)", image)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", image, err)
		}
		img, err := ociimage.Build(spec)
		if err != nil {
			return err
		}
		w, err := ociimage.Write(img, spec.Ref, o.out, image)
		if err != nil {
			return fmt.Errorf("%s: %w", image, err)
		}
		written[image] = w
		fmt.Printf("%s %s@%s\n", image, w.Ref, w.Digest)
	}
	return ociimage.WriteIndex(o.out, written)
}

// goBinary builds a static Go program reproducibly: no cgo, no paths, no build ID, no VCS
// stamp (the same sources give the same bytes in any clone).
func goBinary(pkg, into string) (string, error) {
	out := filepath.Join(into, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return out, nil
}

// users make FROM scratch know its users: root, and the non-root one the images run as.
func users() []ociimage.File {
	return []ociimage.File{
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + nonRoot + ":" + nonRoot + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnonroot:x:" + nonRoot + ":\n")},
	}
}

// baseFiles make FROM scratch a place a non-root program can run: users, and CA certificates.
func baseFiles(o options) []ociimage.File {
	return append(users(), ociimage.File{Path: "/etc/ssl/certs/ca-certificates.crt", Source: o.caFile})
}

func required(flagName, v string) error {
	if v == "" {
		return fmt.Errorf("%s is required", flagName)
	}
	return nil
}

func managerSpec(o options, tmp string) (ociimage.Spec, error) {
	if err := required("-manager-ref", o.manager); err != nil {
		return ociimage.Spec{}, err
	}
	bin, err := goBinary("./cmd/manager", tmp)
	if err != nil {
		return ociimage.Spec{}, err
	}
	files := append(baseFiles(o), ociimage.File{Path: "/manager", Source: bin, Mode: 0o755})
	return ociimage.Spec{Ref: o.manager, Files: files, Entrypoint: []string{"/manager"}, User: nonRoot + ":" + nonRoot,
		Labels: map[string]string{"org.opencontainers.image.title": "ironfleet manager"}}, nil
}

// capiProviderSpec: the Cluster API provider, as the manager (config/capi runs it as non-root
// with a read-only root filesystem).
func capiProviderSpec(o options, tmp string) (ociimage.Spec, error) {
	if err := required("-capi-provider-ref", o.capiProvider); err != nil {
		return ociimage.Spec{}, err
	}
	bin, err := goBinary("./cmd/capi-provider", tmp)
	if err != nil {
		return ociimage.Spec{}, err
	}
	files := append(baseFiles(o), ociimage.File{Path: "/capi-provider", Source: bin, Mode: 0o755})
	return ociimage.Spec{Ref: o.capiProvider, Files: files, Entrypoint: []string{"/capi-provider"}, User: nonRoot + ":" + nonRoot,
		Labels: map[string]string{"org.opencontainers.image.title": "ironfleet cluster api provider"}}, nil
}

// pauseSpec: a pod sandbox's first process, alone.
func pauseSpec(o options, tmp string) (ociimage.Spec, error) {
	if err := required("-pause-ref", o.pause); err != nil {
		return ociimage.Spec{}, err
	}
	bin, err := goBinary("./test/node/pause", tmp)
	if err != nil {
		return ociimage.Spec{}, err
	}
	return ociimage.Spec{Ref: o.pause, Files: []ociimage.File{{Path: "/pause", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/pause"}, User: "65535:65535"}, nil
}

// olmSpec: OLM's binaries as its release image has them, and the cp its unpack Job runs.
func olmSpec(o options) (ociimage.Spec, error) {
	for flagName, v := range map[string]string{"-olm-ref": o.olm, "-olm-dir": o.olmDir} {
		if err := required(flagName, v); err != nil {
			return ociimage.Spec{}, err
		}
	}
	files := append(users(), ociimage.File{Path: "/bin/cp", Source: o.busybox, Mode: 0o755}, ociimage.File{Path: "/tmp", Dir: true, Mode: 0o1777})
	for _, bin := range []string{"olm", "catalog", "package-server", "cpb"} {
		files = append(files, ociimage.File{Path: "/bin/" + bin, Source: filepath.Join(o.olmDir, bin), Mode: 0o755})
	}
	return ociimage.Spec{Ref: o.olm, Files: files, User: nonRoot + ":" + nonRoot}, nil
}

// bootServiceSpec: the boot service with what it serves. It binds DHCP and TFTP ports, which
// its Deployment grants (config/boot-service); the image itself runs as the non-root user.
func bootServiceSpec(o options, tmp string) (ociimage.Spec, error) {
	if err := required("-boot-service-ref", o.bootService); err != nil {
		return ociimage.Spec{}, err
	}
	bin, err := goBinary("./cmd/boot-service", tmp)
	if err != nil {
		return ociimage.Spec{}, err
	}
	files := append(baseFiles(o), ociimage.File{Path: "/boot-service", Source: bin, Mode: 0o755})
	for _, f := range []string{"undionly.kpxe", "ipxe.efi", "snponly.efi"} {
		files = append(files, ociimage.File{Path: "/usr/lib/ipxe/" + f, Source: filepath.Join(o.ipxeDir, f)})
	}
	// The kernel and initramfs for network boots; probe.iso and probe-iso.json, the template
	// of virtual-media boots' ISOs (internal/bootmedia).
	for _, f := range []string{"vmlinuz", "initramfs.cpio.gz", "manifest.json", bootmedia.ISOFile, bootmedia.ManifestFile} {
		src := filepath.Join(o.probeDir, f)
		if _, err := os.Stat(src); err != nil {
			return ociimage.Spec{}, fmt.Errorf("the probe's %s (make probe-image): %w", f, err)
		}
		files = append(files, ociimage.File{Path: "/probe/" + f, Source: src})
	}
	return ociimage.Spec{Ref: o.bootService, Files: files, User: nonRoot + ":" + nonRoot,
		Entrypoint: []string{"/boot-service", "--probe-dir=/probe", "--ipxe-dir=/usr/lib/ipxe"},
		Labels:     map[string]string{"org.opencontainers.image.title": "ironfleet boot service"}}, nil
}

// bundleSpec: the bundle's manifests and metadata, labelled with its metadata's annotations.
func bundleSpec(o options) (ociimage.Spec, error) {
	if err := required("-bundle-ref", o.bundle); err != nil {
		return ociimage.Spec{}, err
	}
	return ociimage.BundleSpec(o.bundleDir, o.bundle)
}
