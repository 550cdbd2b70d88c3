// Package ociimage builds container images without a container engine, reproducibly: the same
// files give the same digests, on any machine, at any time. It is built on
// github.com/google/go-containerregistry (already the probe's OCI client): an image is one layer,
// a tar written here with sorted entries, fixed times and owners, on an empty base (FROM
// scratch), with an OCI manifest and config; it is written as an OCI image layout, and as a tar
// of that layout that `ctr images import` takes with its digest unchanged.
//
// Why not ko: ko builds Go binaries only (the boot service's image carries iPXE and the probe's
// kernel, the bundle and catalog images carry files), and it wants a registry or a daemon to
// write to. Why not buildah or kaniko: both are engines with their own dependencies, for what is
// a tar and three JSON documents.
package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the time every file and the image itself are stamped with: a fixed time is what
// makes two builds the same.
var Epoch = time.Unix(0, 0).UTC()

// File is one file of an image.
type File struct {
	// Path inside the image, absolute ("/manager").
	Path string
	// Mode is the file's permission bits (0o755 for a program).
	Mode int64
	// Data is the file's content; Source, when Data is nil, names a file on this machine to
	// read it from.
	Data   []byte
	Source string
	// Dir makes it an empty directory of Mode (a scratch image's /tmp: 0o1777).
	Dir bool
}

// Spec is an image: its files (one layer) and its config.
type Spec struct {
	// Ref is the image's name, e.g. ghcr.io/ironfleet/manager:v0.1.0.
	Ref        string
	Files      []File
	Entrypoint []string
	Cmd        []string
	// User the image runs as, "uid:gid".
	User         string
	Env          []string
	WorkingDir   string
	Labels       map[string]string
	ExposedPorts []string // "8080/tcp"
	// Platform: linux/amd64 when empty.
	OS, Architecture string
}

// Build makes the image a spec describes.
func Build(spec Spec) (v1.Image, error) {
	if _, err := name.ParseReference(spec.Ref, name.StrictValidation); err != nil {
		return nil, fmt.Errorf("image reference %q: %w", spec.Ref, err)
	}
	data, err := layerTar(spec.Files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "ironfleet ociimage"}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = orDefault(spec.OS, "linux"), orDefault(spec.Architecture, "amd64")
	cfg.Created = v1.Time{Time: Epoch}
	cfg.Config = v1.Config{Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, User: spec.User, Env: spec.Env,
		WorkingDir: spec.WorkingDir, Labels: spec.Labels}
	if len(spec.ExposedPorts) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cfg)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// layerTar is the layer's tar: every file with its parent directories, sorted by path, owned by
// root, stamped with Epoch.
func layerTar(files []File) ([]byte, error) {
	entries := map[string]*File{}
	dirs := map[string]int64{} // directory: its mode
	for i := range files {
		f := &files[i]
		p := path.Clean(f.Path)
		if !path.IsAbs(p) || p == "/" {
			return nil, fmt.Errorf("file path %q is not an absolute file path", f.Path)
		}
		p = strings.TrimPrefix(p, "/")
		if _, dup := entries[p]; dup || (f.Dir && dirs[p] != 0) {
			return nil, fmt.Errorf("file %s is given twice", f.Path)
		}
		if f.Dir {
			dirs[p] = f.Mode
		} else {
			entries[p] = f
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if dirs[d] == 0 {
				dirs[d] = 0o755
			}
		}
	}
	var names []string
	for d := range dirs {
		if _, clash := entries[d]; clash {
			return nil, fmt.Errorf("%s is both a file and a directory", d)
		}
		names = append(names, d+"/")
	}
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		hdr := &tar.Header{Name: n, ModTime: Epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, dirs[strings.TrimSuffix(n, "/")]
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			continue
		}
		f := entries[n]
		data := f.Data
		if data == nil {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Path, err)
			}
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, f.Mode, int64(len(data))
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Tree is the files under dir, placed under at in the image: programs 0755, the rest 0644.
func Tree(dir, at string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		// 0755 or 0644, whatever the checkout's umask made of it.
		mode := int64(0o644)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		files = append(files, File{Path: path.Join(at, filepath.ToSlash(rel)), Source: p, Mode: mode})
		return nil
	})
	return files, err
}

// Written is what Write wrote for one image.
type Written struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Layout is the OCI image layout's directory; Archive the tar of it.
	Layout  string `json:"layout"`
	Archive string `json:"archive"`
}

// Write writes img as an OCI image layout in dir/<base> and as dir/<base>.tar, the layout in a
// tar (what `ctr images import` and `opm` take), both naming it ref.
func Write(img v1.Image, ref, dir, base string) (Written, error) {
	digest, err := img.Digest()
	if err != nil {
		return Written{}, err
	}
	w := Written{Ref: ref, Digest: digest.String(), Layout: filepath.Join(dir, base), Archive: filepath.Join(dir, base+".tar")}
	if err := os.RemoveAll(w.Layout); err != nil {
		return Written{}, err
	}
	p, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return Written{}, err
	}
	// The names containerd (io.containerd.image.name) and the OCI spec give an image in a layout.
	annotations := map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}
	if err := p.AppendImage(img, layout.WithAnnotations(annotations)); err != nil {
		return Written{}, err
	}
	if err := archive(w.Layout, w.Archive); err != nil {
		return Written{}, err
	}
	return w, nil
}

// archive tars a directory reproducibly: sorted, root-owned, stamped with Epoch.
func archive(dir, to string) error {
	files, err := Tree(dir, "/")
	if err != nil {
		return err
	}
	data, err := layerTar(files)
	if err != nil {
		return err
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// WriteIndex records what was written, as JSON keyed by image, in dir/images.json, with what
// earlier builds wrote there of other images.
func WriteIndex(dir string, written map[string]Written) error {
	all := map[string]Written{}
	if data, err := os.ReadFile(filepath.Join(dir, "images.json")); err == nil {
		_ = json.Unmarshal(data, &all) // a broken record is replaced
	}
	for image, w := range written {
		all[image] = w
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "images.json"), append(data, '\n'), 0o644)
}
