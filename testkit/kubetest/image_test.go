//go:build linux

package kubetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// readArchive returns a tar's regular files by name.
func readArchive(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeReg {
			out[h.Name] = b
		}
	}
}

func TestDeriveArchiveAddsALayerOnTop(t *testing.T) {
	dir := t.TempDir()
	baseLayer, err := layerTar([]File{{Path: "/etc", Mode: os.ModeDir | 0o755}, {Path: "/etc/os-release", Mode: 0o644, Data: []byte("ID=test\n")}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(baseLayer)
	baseID := hex.EncodeToString(sum[:])
	config := []byte(`{"architecture":"amd64","os":"linux","config":{"Cmd":["/bin/true"]},"rootfs":{"type":"layers","diff_ids":["sha256:` + baseID + `"]}}`)
	manifest := []byte(`[{"Config":"c.json","RepoTags":["base:1"],"Layers":["` + baseID + `/layer.tar"]}]`)
	base := filepath.Join(dir, "base.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {"c.json", config}, {baseID + "/layer.tar", baseLayer}} {
		if err := writeEntry(tw, e.name, e.data); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if err := os.WriteFile(base, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "derived.tar")
	if err := deriveArchive(base, out, "derived:2", []File{{Path: "/usr/local/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n")}}); err != nil {
		t.Fatal(err)
	}
	if tag, err := archiveTag(out); err != nil || tag != "derived:2" {
		t.Errorf("archiveTag = %q, %v", tag, err)
	}
	files := readArchive(t, out)
	var m []dockerManifest
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil || len(m) != 1 {
		t.Fatalf("manifest: %v %s", err, files["manifest.json"])
	}
	if len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "derived:2" || len(m[0].Layers) != 2 || m[0].Layers[0] != baseID+"/layer.tar" {
		t.Fatalf("manifest = %+v", m[0])
	}
	var cfg struct {
		Config map[string]any
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(files[m[0].Config], &cfg); err != nil {
		t.Fatal(err)
	}
	top := files[m[0].Layers[1]]
	topSum := sha256.Sum256(top)
	if want := []string{"sha256:" + baseID, "sha256:" + hex.EncodeToString(topSum[:])}; len(cfg.RootFS.DiffIDs) != 2 || cfg.RootFS.DiffIDs[0] != want[0] || cfg.RootFS.DiffIDs[1] != want[1] {
		t.Errorf("diff_ids = %v, want %v", cfg.RootFS.DiffIDs, want)
	}
	if cfg.Config["Cmd"] == nil {
		t.Error("the base's Cmd was lost")
	}
	if !bytes.Equal(files[baseID+"/layer.tar"], baseLayer) {
		t.Error("the base layer changed")
	}
	tr := tar.NewReader(bytes.NewReader(top))
	h, err := tr.Next()
	if err != nil || h.Name != "usr/local/bin/tool" || h.Mode != 0o755 {
		t.Errorf("top layer's first entry = %+v, %v", h, err)
	}
}
