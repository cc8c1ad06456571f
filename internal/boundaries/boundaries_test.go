package boundaries

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/capgate/capgate"

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// list returns the packages matching pattern, with their imports.
func list(t *testing.T, pattern string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", pattern)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestPluginsImportOnlySDKAndProto: a plugin, tests included, sees the
// host only through sdk/ and proto/ (and its own packages), as a plugin
// written outside this module must.
func TestPluginsImportOnlySDKAndProto(t *testing.T) {
	pkgs := list(t, "./plugins/...")
	if len(pkgs) == 0 {
		t.Fatal("no plugin packages found")
	}
	for _, p := range pkgs {
		rest := strings.TrimPrefix(p.ImportPath, module+"/plugins/")
		own := module + "/plugins/" + strings.SplitN(rest, "/", 2)[0]
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if !strings.HasPrefix(imp, module+"/") || imp == own || strings.HasPrefix(imp, own+"/") ||
				imp == module+"/sdk" || strings.HasPrefix(imp, module+"/sdk/") || strings.HasPrefix(imp, module+"/proto/") {
				continue
			}
			t.Errorf("%s imports %s: plugins may import only sdk/, proto/ and their own packages", p.ImportPath, imp)
		}
	}
}

// TestSDKDoesNotImportTheHost: the SDK and the contract stand apart from
// the host's own packages; what both sides share lives in internal/.
func TestSDKDoesNotImportTheHost(t *testing.T) {
	for _, pattern := range []string{"./sdk/...", "./proto/...", "./internal/..."} {
		for _, p := range list(t, pattern) {
			for _, imp := range append(p.Imports, p.TestImports...) {
				if strings.HasPrefix(imp, module+"/host/") || strings.HasPrefix(imp, module+"/plugins/") {
					t.Errorf("%s imports %s", p.ImportPath, imp)
				}
			}
		}
	}
}
