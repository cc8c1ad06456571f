package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The replica topology files under deploy/ cannot be run here (no docker,
// no kubectl): these tests parse them and check the parts that make the
// topology what the README says — two replicas sharing PostgreSQL and one
// JetStream stream, each with a data directory (its search index) of its
// own — and run `capgate validate` on the replica config.

// deployFile reads a file under deploy/.
func deployFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocs parses every document of a YAML file into generic maps.
func yamlDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(deployFile(t, name)))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("deploy/%s: %v", name, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("deploy/%s: no YAML document", name)
	}
	return docs
}

// dig walks a path of map keys and list indexes (as ints) through a parsed
// YAML value; nil when any step is missing.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func digString(v any, path ...any) string {
	s, _ := dig(v, path...).(string)
	return s
}

// requiredRefs are the ${VAR} references of a text that have no default:
// each must be set, or capgate refuses to start.
var refPattern = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// Comments are left out: only values are expanded.
func requiredRefs(text string) []string {
	var vars []string
	var values strings.Builder
	for line := range strings.Lines(text) {
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ') {
			line = line[:i]
		}
		values.WriteString(line + "\n")
	}
	for _, m := range refPattern.FindAllStringSubmatch(values.String(), -1) {
		if m[2] == "" && !slices.Contains(vars, m[1]) {
			vars = append(vars, m[1])
		}
	}
	slices.Sort(vars)
	return vars
}

// TestDeployReplicaConfig checks deploy/capgate-replica.yaml: booking on the
// shared PostgreSQL and events on NATS, both from the environment, and
// `capgate validate` accepting it with the variables set and naming a
// missing one.
func TestDeployReplicaConfig(t *testing.T) {
	text := string(deployFile(t, "capgate-replica.yaml"))
	cfg := yamlDocs(t, "capgate-replica.yaml")[0]
	if got := digString(cfg, "events", "nats_url"); got != "${NATS_URL}" {
		t.Errorf("events.nats_url = %q, want ${NATS_URL}", got)
	}
	var names []string
	for i := range 3 {
		names = append(names, digString(cfg, "plugins", i, "name"))
	}
	if !slices.Equal(names, []string{"booking", "subscription", "search"}) {
		t.Errorf("plugins = %v, want booking, subscription and search", names)
	}
	for i, name := range names[:2] {
		if got := digString(cfg, "plugins", i, "config", "dsn"); got != "${DATABASE_DSN}" {
			t.Errorf("the %s plugin's dsn = %q, want ${DATABASE_DSN}", name, got)
		}
	}
	for _, pack := range []string{"booking", "subscription", "search"} {
		if dig(cfg, "packs", pack) != true {
			t.Errorf("packs = %v, want %s on", dig(cfg, "packs"), pack)
		}
	}
	want := []string{"ADMIN_TOKEN_SHA256", "AGENT_TOKEN", "DATABASE_DSN", "NATS_URL"}
	if got := requiredRefs(text); !slices.Equal(got, want) {
		t.Errorf("required ${VAR}s of the replica config = %v, want %v", got, want)
	}

	needE2E(t)
	bins := binaries(t)
	// validate checks that each plugin binary exists: the test host's, and
	// the subscription plugin the replicas run besides.
	pluginDir := t.TempDir()
	for name, path := range bins.plugins {
		if err := os.Link(path, filepath.Join(pluginDir, "capgate-plugin-"+name)); err != nil {
			copyFile(t, path, filepath.Join(pluginDir, "capgate-plugin-"+name))
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "capgate-plugin-subscription"), "./plugins/subscription")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the subscription plugin: %v\n%s", err, out)
	}
	env := append(hostEnv(),
		"PLUGIN_DIR="+pluginDir,
		"DATABASE_DSN=postgres://capgate:secret@postgres:5432/capgate?sslmode=disable",
		"NATS_URL=nats://nats:4222",
		"ADMIN_TOKEN_SHA256="+strings.Repeat("ab", 32),
		"AGENT_TOKEN=agent-token-0123456789",
	)
	path := filepath.Join(repoRoot(t), "deploy", "capgate-replica.yaml")
	validate := func(env []string) (string, error) {
		cmd := exec.Command(bins.host, "validate", "-c", path)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := validate(env); err != nil {
		t.Errorf("capgate validate deploy/capgate-replica.yaml: %v\n%s", err, out)
	} else {
		t.Logf("capgate validate: %s", strings.TrimSpace(out))
	}
	// Without the DSN the config is refused, naming the variable.
	var noDSN []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DATABASE_DSN=") {
			noDSN = append(noDSN, kv)
		}
	}
	if out, err := validate(noDSN); err == nil || !strings.Contains(out, "DATABASE_DSN") {
		t.Errorf("capgate validate without DATABASE_DSN: want an error naming it, got %v:\n%s", err, out)
	}
}

// TestDeployCompose checks deploy/compose.yaml: PostgreSQL, NATS with
// JetStream, two capgate replicas each with its own data volume and the
// shared DSN and NATS URL, and a load balancer over both.
func TestDeployCompose(t *testing.T) {
	c := yamlDocs(t, "compose.yaml")[0]
	services, _ := c["services"].(map[string]any)
	for _, name := range []string{"postgres", "nats", "capgate-1", "capgate-2", "lb"} {
		if services[name] == nil {
			t.Errorf("compose.yaml has no service %s", name)
		}
	}
	if cmd := dig(services, "nats", "command"); !slices.Contains(toStrings(cmd), "-js") {
		t.Errorf("the nats service runs %v, want JetStream on (-js)", cmd)
	}
	required := requiredRefs(string(deployFile(t, "capgate-replica.yaml")))
	dataVolumes := map[string]string{}
	for _, name := range []string{"capgate-1", "capgate-2"} {
		svc := services[name]
		if digString(svc, "build", "dockerfile") != "deploy/Containerfile" || digString(svc, "build", "context") != ".." {
			t.Errorf("%s: build = %v, want deploy/Containerfile from the repo root", name, dig(svc, "build"))
		}
		env, _ := dig(svc, "environment").(map[string]any)
		for _, v := range required {
			if env[v] == nil {
				t.Errorf("%s: the environment sets no %s, which the replica config requires", name, v)
			}
		}
		if dsn, _ := env["DATABASE_DSN"].(string); !strings.HasPrefix(dsn, "postgres://") || !strings.Contains(dsn, "@postgres:5432/") {
			t.Errorf("%s: DATABASE_DSN = %q, want the postgres service", name, dsn)
		}
		if env["NATS_URL"] != "nats://nats:4222" {
			t.Errorf("%s: NATS_URL = %v, want nats://nats:4222", name, env["NATS_URL"])
		}
		var config bool
		for _, v := range toStrings(dig(svc, "volumes")) {
			src, dst, _ := strings.Cut(v, ":")
			switch {
			case strings.HasPrefix(dst, "/etc/capgate/capgate.yaml"):
				config = src == "./capgate-replica.yaml"
			case dst == "/var/lib/capgate":
				dataVolumes[name] = src
			}
		}
		if !config {
			t.Errorf("%s: deploy/capgate-replica.yaml is not mounted as /etc/capgate/capgate.yaml", name)
		}
	}
	v1, v2 := dataVolumes["capgate-1"], dataVolumes["capgate-2"]
	if v1 == "" || v2 == "" || v1 == v2 {
		t.Errorf("replica data volumes = %q and %q, want one of its own each", v1, v2)
	}
	for _, v := range []string{v1, v2, "pgdata", "natsdata"} {
		if v != "" && dig(c, "volumes", v) == nil && !slices.Contains(keys(c["volumes"]), v) {
			t.Errorf("volume %s is not declared", v)
		}
	}
	// The balancer's config lists both replicas.
	var lbConf string
	for _, v := range toStrings(dig(services, "lb", "volumes")) {
		if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, "/etc/nginx/nginx.conf") {
			lbConf = string(deployFile(t, strings.TrimPrefix(src, "./")))
		}
	}
	for _, s := range []string{"server capgate-1:8080", "server capgate-2:8080", "proxy_pass http://capgate"} {
		if !strings.Contains(lbConf, s) {
			t.Errorf("the lb's nginx.conf lacks %q", s)
		}
	}
	deployFile(t, "Containerfile")
}

// TestDeployKubernetes checks deploy/k8s/: a Deployment of 2 replicas with
// a readiness probe on /healthz and an emptyDir data directory per pod, the
// Service that selects its pods, the ConfigMap holding the replica config
// unchanged, and the Secret holding every variable the config requires.
func TestDeployKubernetes(t *testing.T) {
	objs := map[string]map[string]any{}
	kust := yamlDocs(t, "k8s/kustomization.yaml")[0]
	for _, f := range toStrings(kust["resources"]) {
		for _, d := range yamlDocs(t, "k8s/"+f) {
			kind := digString(d, "kind")
			if digString(d, "apiVersion") == "" || kind == "" || digString(d, "metadata", "name") == "" {
				t.Errorf("k8s/%s: a document without apiVersion, kind or metadata.name", f)
			}
			objs[kind] = d
		}
	}
	dep, svc, cm, sec := objs["Deployment"], objs["Service"], objs["ConfigMap"], objs["Secret"]
	if dep == nil || svc == nil || cm == nil || sec == nil {
		t.Fatalf("k8s/ kinds = %v, want Deployment, Service, ConfigMap and Secret", keys(objs))
	}
	if r, _ := dig(dep, "spec", "replicas").(int); r != 2 {
		t.Errorf("Deployment replicas = %v, want 2", dig(dep, "spec", "replicas"))
	}
	pod := dig(dep, "spec", "template")
	labels, _ := dig(pod, "metadata", "labels").(map[string]any)
	for k, v := range dig(dep, "spec", "selector", "matchLabels").(map[string]any) {
		if labels[k] != v {
			t.Errorf("Deployment selector %s=%v does not match the pod labels %v", k, v, labels)
		}
	}
	for k, v := range dig(svc, "spec", "selector").(map[string]any) {
		if labels[k] != v {
			t.Errorf("Service selector %s=%v does not match the pod labels %v", k, v, labels)
		}
	}
	ctr := dig(pod, "spec", "containers", 0)
	if p := digString(ctr, "readinessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("readiness probe path = %q, want /healthz", p)
	}
	// Liveness on /livez: a plugin being restarted must not restart the pod.
	if p := digString(ctr, "livenessProbe", "httpGet", "path"); p != "/livez" {
		t.Errorf("liveness probe path = %q, want /livez", p)
	}
	if port := digString(ctr, "ports", 0, "name"); port == "" || port != digString(svc, "spec", "ports", 0, "targetPort") || port != digString(ctr, "readinessProbe", "httpGet", "port") {
		t.Errorf("container port %q, Service targetPort %q and probe port %q must agree", port, digString(svc, "spec", "ports", 0, "targetPort"), digString(ctr, "readinessProbe", "httpGet", "port"))
	}
	if n, _ := dig(ctr, "ports", 0, "containerPort").(int); n != 8080 {
		t.Errorf("containerPort = %v, want 8080 (the config's listen)", dig(ctr, "ports", 0, "containerPort"))
	}
	// The data directory is an emptyDir of the pod's own.
	volumes := map[string]any{}
	for _, v := range dig(pod, "spec", "volumes").([]any) {
		volumes[digString(v, "name")] = v
	}
	mounts := map[string]string{}
	for _, m := range dig(ctr, "volumeMounts").([]any) {
		mounts[digString(m, "mountPath")] = digString(m, "name")
	}
	if data := mounts["/var/lib/capgate"]; data == "" || dig(volumes[data], "emptyDir") == nil {
		t.Errorf("/var/lib/capgate is mounted from %q (%v), want an emptyDir", data, volumes[data])
	}
	if cfg := mounts["/etc/capgate"]; cfg == "" || digString(volumes[cfg], "configMap", "name") != digString(cm, "metadata", "name") {
		t.Errorf("/etc/capgate is mounted from %q (%v), want the ConfigMap", cfg, volumes[cfg])
	}
	if got := toStrings(dig(ctr, "args")); !slices.Equal(got, []string{"serve", "-c", "/etc/capgate/capgate.yaml"}) {
		t.Errorf("container args = %v", got)
	}
	// The ConfigMap holds deploy/capgate-replica.yaml as it is.
	if got, want := digString(cm, "data", "capgate.yaml"), string(deployFile(t, "capgate-replica.yaml")); got != want {
		t.Errorf("the ConfigMap's capgate.yaml differs from deploy/capgate-replica.yaml")
	}
	// The Secret, given to the pod whole, sets every required variable.
	if digString(ctr, "envFrom", 0, "secretRef", "name") != digString(sec, "metadata", "name") {
		t.Errorf("the container does not take its environment from the Secret")
	}
	secret, _ := dig(sec, "stringData").(map[string]any)
	for _, v := range requiredRefs(string(deployFile(t, "capgate-replica.yaml"))) {
		if secret[v] == nil {
			t.Errorf("the Secret sets no %s, which the replica config requires", v)
		}
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func keys[V any](v V) []string {
	var out []string
	switch m := any(v).(type) {
	case map[string]any:
		for k := range m {
			out = append(out, k)
		}
	case map[string]map[string]any:
		for k := range m {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
