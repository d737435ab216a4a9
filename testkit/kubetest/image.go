//go:build linux

package kubetest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// File is one file of a layer added to an image: what a Dockerfile's COPY
// puts there.
type File struct {
	Path string      // absolute path in the image
	Mode os.FileMode // permission bits, and os.ModeDir for a directory
	UID  int
	Data []byte
}

// dockerManifest is one entry of a docker-save archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// DeriveImage writes, under the cluster's directory, a docker-save archive
// of the image in base (a docker-save archive with one image) with files
// added as one more layer, tagged tag, and imports it. It is how a test
// builds the recipe's images, whose last steps copy in what the test has
// just built (the sparkdap binary, the generated wrapper, the job).
func (c *Cluster) DeriveImage(ctx context.Context, base, tag string, files []File) error {
	out := filepath.Join(c.Dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(tag)+".tar")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := deriveArchive(base, out, tag, files); err != nil {
		return fmt.Errorf("derive %s from %s: %w", tag, base, err)
	}
	return c.ImportImage(ctx, out)
}

// archiveTag is the one tag of a docker-save archive's one image.
func archiveTag(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no manifest.json: %w", archive, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []dockerManifest
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return "", fmt.Errorf("%s: manifest.json: %w", archive, err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 {
			return "", fmt.Errorf("%s: want one image with one tag", archive)
		}
		return m[0].RepoTags[0], nil
	}
}

func deriveArchive(base, out, tag string, files []File) error {
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(layer)
	diffID := hex.EncodeToString(sum[:])

	in, err := os.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)

	// Copy every entry but the manifest and the config, which change; keep
	// those two for the end.
	var manifest []dockerManifest
	small := map[string][]byte{}
	tr := tar.NewReader(in)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg && (h.Name == "manifest.json" || strings.HasSuffix(h.Name, ".json")) && h.Size < 1<<20 {
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			small[h.Name] = b
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(small["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		return fmt.Errorf("manifest.json of %s: want one image (%v)", base, err)
	}
	var config map[string]any
	if err := json.Unmarshal(small[manifest[0].Config], &config); err != nil {
		return fmt.Errorf("config of %s: %w", base, err)
	}
	rootfs, _ := config["rootfs"].(map[string]any)
	ids, _ := rootfs["diff_ids"].([]any)
	if rootfs == nil || len(ids) != len(manifest[0].Layers) {
		return fmt.Errorf("config of %s: rootfs.diff_ids does not match its layers", base)
	}
	rootfs["diff_ids"] = append(ids, "sha256:"+diffID)
	configJSON, err := json.Marshal(config)
	if err != nil {
		return err
	}
	csum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(csum[:]) + ".json"
	for name, b := range small { // the base's other JSON files, if any
		if name != "manifest.json" && name != manifest[0].Config {
			if err := writeEntry(tw, name, b); err != nil {
				return err
			}
		}
	}
	layerName := diffID + "/layer.tar"
	if err := writeEntry(tw, layerName, layer); err != nil {
		return err
	}
	if err := writeEntry(tw, configName, configJSON); err != nil {
		return err
	}
	m, err := json.Marshal([]dockerManifest{{Config: configName, RepoTags: []string{tag}, Layers: append(manifest[0].Layers, layerName)}})
	if err != nil {
		return err
	}
	if err := writeEntry(tw, "manifest.json", m); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// layerTar is a layer holding files in order. A File whose Mode has
// os.ModeDir is a directory; a parent that is neither in the base image nor
// listed before its children is made by the runtime as root's, 0755.
func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("layer file %q: want a clean absolute path", f.Path)
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(f.Mode.Perm()),
			Size: int64(len(f.Data)), Uid: f.UID, ModTime: mtime}
		if f.Mode.IsDir() {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, h.Name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil && !f.Mode.IsDir() {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeEntry(tw *tar.Writer, name string, b []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}
