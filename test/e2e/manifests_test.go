//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// overlays are deploy/kustomize's overlays, one per plugin kip ships.
var overlays = []string{"local", "aws", "gce", "azure"}

// TestManifestsPassServerSideApply: every manifest kip ships is accepted by
// the real API server, as `kubectl apply --server-side --dry-run=server`
// sees it: each overlay of deploy/kustomize as `kubectl apply -k` builds it,
// and the plain manifests (deploy/rbac, the cluster DNS, metrics-server, the
// example workload, the Prometheus binding). A field misspelt, a wrong apiVersion or a patch that
// no longer matches its target fails here. The dry run takes over fields
// the run applied (the cluster DNS's image) and changes nothing.
func TestManifestsPassServerSideApply(t *testing.T) {
	deploy := deployCopy(t)
	kubectl := filepath.Join(f.Cluster.BinDir, "kubectl")
	dryRun := func(t *testing.T, manifest []byte) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", f.Cluster.Kubeconfig,
			"apply", "--server-side", "--force-conflicts", "--dry-run=server", "--field-manager=kip-e2e", "-f", "-")
		cmd.Stdin = bytes.NewReader(manifest)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply --server-side --dry-run=server: %v\n%s", err, out)
		}
		t.Logf("%s", out)
	}
	for _, overlay := range overlays {
		t.Run("kustomize/"+overlay, func(t *testing.T) {
			out, err := exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(deploy, "kustomize", "overlays", overlay)).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize overlays/%s: %v\n%s", overlay, err, stderrOf(err))
			}
			for _, kind := range []string{"Namespace", "ServiceAccount", "Deployment", "PodDisruptionBudget", "Service", "ConfigMap"} {
				if !bytes.Contains(out, []byte("\nkind: "+kind+"\n")) {
					t.Errorf("overlays/%s has no %s", overlay, kind)
				}
			}
			if bytes.Contains(out, []byte("name: kip-images")) {
				t.Errorf("overlays/%s outputs the local kip-images ConfigMap; kustomize should drop it (config.kubernetes.io/local-config)", overlay)
			}
			dryRun(t, out)
		})
	}
	rbac, err := filepath.Glob(filepath.Join(deploy, "rbac", "*.yaml"))
	if err != nil || len(rbac) == 0 {
		t.Fatalf("no deploy/rbac/*.yaml (%v)", err)
	}
	list, err := os.ReadFile(filepath.Join(deploy, "rbac", "Kustomization"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"coredns/coredns.yaml", "metrics-server/metrics-server.yaml", "examples/hello.yaml", "prometheus/kip-scrape.yaml"}
	for _, path := range rbac {
		name := filepath.Base(path)
		// The tests apply deploy/rbac/*.yaml; the manifests, its Kustomization.
		if !bytes.Contains(list, []byte("\n  - "+name+"\n")) {
			t.Errorf("deploy/rbac/Kustomization does not list %s, which the tests apply", name)
		}
		files = append(files, "rbac/"+name)
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(deploy, file))
			if err != nil {
				t.Fatal(err)
			}
			dryRun(t, []byte(strings.ReplaceAll(string(data), "${KIP_DEMO_REGISTRY}", "registry.example.com")))
		})
	}
}

// deployCopy copies the repository's deploy directory into a temporary
// directory, with deploy/kustomize/base/images.env as `make images` wrote
// it, or, before any make images, one naming an image that does not exist
// (a server-side dry run does not pull it).
func deployCopy(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "deploy")
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying deploy/: %v", err)
	}
	env := filepath.Join(dst, "kustomize", "base", "images.env")
	if _, err := os.Stat(env); os.IsNotExist(err) {
		t.Logf("no deploy/kustomize/base/images.env (make images writes it): using a placeholder image")
		placeholder := "kip=registry.example.com/kip/kip:not-built\n"
		if err := os.WriteFile(env, []byte(placeholder), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// stderrOf is the standard error an *exec.ExitError kept.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
