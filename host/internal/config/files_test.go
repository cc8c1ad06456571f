package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := write("exe", 0o755)
	noExec := write("noexec", 0o644)
	digest := HashTokenForTest("#!/bin/sh\n")
	wrong := strings.Repeat("0", 64)
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name    string
		plugins []Plugin
		want    []string
	}{
		{"none", nil, nil},
		{"executable", []Plugin{{Name: "a", Path: exe}}, nil},
		{"digest matches", []Plugin{{Name: "a", Path: exe, SHA256: digest}}, nil},
		{"missing", []Plugin{{Name: "a", Path: missing}},
			[]string{"plugins[0].path: stat " + missing + ": no such file or directory"}},
		{"directory", []Plugin{{Name: "a", Path: dir}},
			[]string{"plugins[0].path: " + dir + " is not a regular file"}},
		{"not executable", []Plugin{{Name: "a", Path: exe}, {Name: "b", Path: noExec}},
			[]string{"plugins[1].path: " + noExec + " is not executable"}},
		{"digest differs", []Plugin{{Name: "a", Path: exe, SHA256: wrong}},
			[]string{"plugins[0].sha256: " + exe + " has digest " + digest + ", not the configured one"}},
		{"all listed", []Plugin{{Name: "a", Path: missing}, {Name: "b", Path: exe, SHA256: wrong}},
			[]string{"plugins[0].path: stat " + missing + ": no such file or directory",
				"plugins[1].sha256: " + exe + " has digest " + digest + ", not the configured one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{Plugins: tt.plugins, File: "capgate.yaml"}
			err := cfg.CheckFiles()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			if got := problemLines(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCheckFilesUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	p := filepath.Join(t.TempDir(), "locked")
	if err := os.WriteFile(p, nil, 0o111); err != nil {
		t.Fatal(err)
	}
	err := (&Config{Plugins: []Plugin{{Name: "a", Path: p, SHA256: strings.Repeat("0", 64)}}}).CheckFiles()
	if got := problemLines(t, err); len(got) != 1 || !strings.HasPrefix(got[0], "plugins[0].path: open "+p) {
		t.Errorf("got %q", got)
	}
}

// TestFileSHA256Failures reaches the read failures CheckFiles guards
// against after its own checks passed (a file replaced mid-check).
func TestFileSHA256Failures(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, path, prefix string }{
		{"open fails", filepath.Join(dir, "gone"), "open " + filepath.Join(dir, "gone") + ": "},
		{"read fails", dir, "reading " + dir + ": "},
	}
	for _, tt := range tests {
		if _, err := fileSHA256(tt.path); err == nil || !strings.HasPrefix(err.Error(), tt.prefix) {
			t.Errorf("%s: err = %v, want prefix %q", tt.name, err, tt.prefix)
		}
	}
}
