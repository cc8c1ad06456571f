package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// CheckFiles verifies what Load leaves to start-up: that each plugin binary
// exists, is an executable regular file and, when sha256 is set, has that
// digest. It returns an *Error listing every plugin that fails, for
// "capgate validate"; the host checks again when it starts a plugin.
func (c *Config) CheckFiles() error {
	var problems []*Problem
	for i, p := range c.Plugins {
		path := fmt.Sprintf("plugins[%d].path", i)
		if msg := checkBinary(p.Path); msg != "" {
			problems = append(problems, &Problem{Path: path, Message: msg})
			continue
		}
		if p.SHA256 == "" {
			continue
		}
		sum, err := fileSHA256(p.Path)
		if err != nil {
			problems = append(problems, &Problem{Path: path, Message: err.Error()})
		} else if sum != p.SHA256 {
			problems = append(problems, &Problem{Path: fmt.Sprintf("plugins[%d].sha256", i),
				Message: fmt.Sprintf("%s has digest %s, not the configured one", p.Path, sum)})
		}
	}
	if len(problems) > 0 {
		return &Error{File: c.File, Problems: problems}
	}
	return nil
}

func checkBinary(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err.Error()
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("%s is not a regular file", path)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("%s is not executable", path)
	}
	return ""
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
