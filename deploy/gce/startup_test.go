package gce

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stubCurl stands in for curl: the metadata server's URLs are read from
// $MDDIR (a directory lists its entries, a missing file is curl -f's
// 404, exit 22; a request without Metadata-Flavor: Google is refused as
// the metadata server refuses it), file:// URLs are copied, -o writes the
// answer to a file.
const stubCurl = `#!/bin/sh
out=; url=; flavor=
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift ;;
    -H) [ "$2" = "Metadata-Flavor: Google" ] && flavor=1; shift ;;
    --retry) shift ;;
    -*) ;;
    *) url=$1 ;;
  esac
  shift
done
case "$url" in
  http://metadata.google.internal/computeMetadata/v1/*)
    [ -n "$flavor" ] || exit 22
    f="$MDDIR/${url#http://metadata.google.internal/computeMetadata/v1/}"
    if [ -d "$f" ]; then ls "$f"; exit 0; fi
    [ -f "$f" ] || exit 22
    src=$f ;;
  file://*) src=${url#file://} ;;
  *) exit 6 ;;
esac
if [ -n "$out" ]; then cp "$src" "$out"; else cat "$src"; fi
`

// recipe is startup.sh with its paths moved under dir (and its minute of
// waiting after a failure cut), to run as a test.
func recipe(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("startup.sh")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(
		"/usr/local/bin/", dir+"/bin/",
		"/run/kip", dir+"/run",
		"/dev/console", dir+"/console",
		"/etc/default/instance_configs.cfg", dir+"/instance_configs.cfg",
		"sleep 60", "true",
	).Replace(string(data))
}

// env is a cell for the recipe: metadata items, the release it downloads
// from, stubs for curl, dpkg and iptables on PATH.
type env struct {
	dir   string
	agent []byte // the kip-cell the release holds
}

func newEnv(t *testing.T) env {
	t.Helper()
	dir := t.TempDir()
	e := env{dir: dir, agent: []byte("#!/bin/sh\necho \"$@\" > " + filepath.Join(dir, "agent-args") + "\n")}
	files := map[string]string{
		"release/kip-cell-linux-amd64":          string(e.agent),
		"md/instance/network-interfaces/0/ip":   "10.128.0.7",
		"stubs/curl":                            stubCurl,
		"stubs/dpkg":                            "#!/bin/sh\necho amd64\n",
		"stubs/systemctl":                       "#!/bin/sh\necho \"$@\" >> " + filepath.Join(dir, "systemctl.log") + "\n",
		"stubs/iptables":                        "#!/bin/sh\n[ \"$1\" = -C ] && exit 1\necho \"$@\" >> " + filepath.Join(dir, "iptables.log") + "\n",
		"md/instance/attributes/startup-script": "#!/bin/sh\n",
	}
	for _, d := range []string{"bin", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil { //nolint:gosec // a test's executable stubs
			t.Fatal(err)
		}
	}
	return e
}

// setAttributes sets the instance's metadata items.
func (e env) setAttributes(t *testing.T, attributes map[string]string) {
	t.Helper()
	for k, v := range attributes {
		if err := os.WriteFile(filepath.Join(e.dir, "md", "instance", "attributes", k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (e env) sum() string {
	s := sha256.Sum256(e.agent)
	return hex.EncodeToString(s[:])
}

// run runs script with the stubs first on PATH.
func (e env) run(script string, args ...string) ([]byte, error) {
	cmd := exec.Command("sh", append([]string{"-c", script, "startup.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(e.dir, "stubs")+":"+os.Getenv("PATH"), "MDDIR="+filepath.Join(e.dir, "md"))
	return cmd.CombinedOutput()
}

// withSettings sets the recipe's settings block as an operator edits it.
func withSettings(script, url, sumAMD64 string) string {
	script = strings.Replace(script, "\nKIP_CELL_URL=https://github.com/kipcell/kip/releases/download/v0.1.0/kip-cell-linux-{arch}\n", "\nKIP_CELL_URL="+url+"\n", 1)
	return strings.Replace(script, "\nKIP_CELL_SHA256_AMD64=\n", "\nKIP_CELL_SHA256_AMD64="+sumAMD64+"\n", 1)
}

// TestStartupScriptChecksTheAgent runs the recipe's start with stand-ins
// for curl and the metadata server: a kip-cell whose SHA-256 is missing
// or another is refused and not installed; the right one, set in the
// script or in the metadata, is installed and run with the bootstrap.
func TestStartupScriptChecksTheAgent(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Fatalf("the boot recipe needs sha256sum (coreutils): %v", err)
	}
	other := strings.Repeat("0", 64)
	tests := []struct {
		name     string
		inScript string            // KIP_CELL_SHA256_AMD64; "good" is the agent's
		metadata map[string]string // besides kip-bootstrap; "good" is the agent's sum
		wantOK   bool
		wantMsg  string
	}{
		{name: "right sum in the script", inScript: "good", wantOK: true},
		{name: "right sum in the metadata", inScript: other, metadata: map[string]string{"kip-cell-sha256": "good"}, wantOK: true},
		{name: "no sum", wantMsg: "no SHA-256 for kip-cell on amd64"},
		{name: "not a sum", inScript: "abc", wantMsg: "no SHA-256 for kip-cell on amd64"},
		{name: "another sum", inScript: other, wantMsg: "does not have the SHA-256 " + other},
		{name: "another sum in the metadata", inScript: "good", metadata: map[string]string{"kip-cell-sha256": other}, wantMsg: "does not have the SHA-256 " + other},
		{name: "no bootstrap", inScript: "good", metadata: map[string]string{"kip-bootstrap": ""}, wantMsg: "no metadata item kip-bootstrap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			attrs := map[string]string{"kip-bootstrap": `{"cellID":"kip-1"}`}
			for k, v := range tt.metadata {
				attrs[k] = strings.ReplaceAll(v, "good", e.sum())
			}
			if attrs["kip-bootstrap"] == "" {
				delete(attrs, "kip-bootstrap")
			}
			e.setAttributes(t, attrs)
			script := withSettings(recipe(t, e.dir), "file://"+filepath.Join(e.dir, "release", "kip-cell-linux-{arch}"), strings.ReplaceAll(tt.inScript, "good", e.sum()))
			out, err := e.run(script, "start")
			installed, statErr := os.ReadFile(filepath.Join(e.dir, "bin", "kip-cell"))
			if !tt.wantOK {
				if err == nil {
					t.Fatalf("the recipe accepted it: %s", out)
				}
				if !strings.Contains(string(out), tt.wantMsg) {
					t.Errorf("output %q does not say %q", out, tt.wantMsg)
				}
				if statErr == nil {
					t.Error("a refused kip-cell was installed")
				}
				if _, err := os.Stat(filepath.Join(e.dir, "bin", "kip-cell.download")); err == nil {
					t.Error("a refused download was left behind")
				}
				return
			}
			if err != nil || statErr != nil || string(installed) != string(e.agent) {
				t.Fatalf("err %v, output %q, installed %q (%v)", err, out, installed, statErr)
			}
			args, err := os.ReadFile(filepath.Join(e.dir, "agent-args"))
			if err != nil {
				t.Fatalf("kip-cell did not run: %v (output %q)", err, out)
			}
			wantArgs := "--bootstrap " + e.dir + "/run/bootstrap.json --pod-ip 10.128.0.7 --containerd-address /run/containerd/containerd.sock --imds-endpoint none --gce-metadata-endpoint http://metadata.google.internal\n"
			if string(args) != wantArgs {
				t.Errorf("kip-cell ran with %q, want %q", args, wantArgs)
			}
		})
	}
}

// TestStartupScriptSavesTheBootstrapAndClosesMetadata: the bootstrap is
// saved as the metadata holds it, readable by root only, and pods lose
// the metadata server unless KIP_POD_METADATA=1.
func TestStartupScriptSavesTheBootstrapAndClosesMetadata(t *testing.T) {
	const bootstrap = `{"cellID":"kip-1","joinToken":"t"}`
	for _, open := range []bool{false, true} {
		e := newEnv(t)
		e.setAttributes(t, map[string]string{"kip-bootstrap": bootstrap, "kip-cell-sha256": ""})
		script := withSettings(recipe(t, e.dir), "file://"+filepath.Join(e.dir, "release", "kip-cell-linux-{arch}"), e.sum())
		if open {
			script = strings.Replace(script, "\nKIP_POD_METADATA=0\n", "\nKIP_POD_METADATA=1\n", 1)
		}
		if out, err := e.run(script, "start"); err != nil {
			t.Fatalf("start: %v: %s", err, out)
		}
		saved := filepath.Join(e.dir, "run", "bootstrap.json")
		got, err := os.ReadFile(saved)
		if err != nil || string(got) != bootstrap {
			t.Errorf("saved bootstrap %q (%v), want %q", got, err, bootstrap)
		}
		if fi, err := os.Stat(saved); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("bootstrap file mode %v (%v), want 0600", fi.Mode().Perm(), err)
		}
		rules, _ := os.ReadFile(filepath.Join(e.dir, "iptables.log"))
		wantRules := "-I OUTPUT -d 169.254.169.254 -m cgroup ! --path system.slice -j DROP\n"
		if open {
			wantRules = ""
		}
		if string(rules) != wantRules {
			t.Errorf("KIP_POD_METADATA=%v: iptables %q, want %q", open, rules, wantRules)
		}
	}
}

// TestStartupScriptKeepsTheAliasIP runs the recipe's start twice: the
// first tells Google's guest agent to leave alias IPs alone (ip_aliases =
// false, beside what the file held) and restarts it; the second, with
// that already said, changes nothing.
func TestStartupScriptKeepsTheAliasIP(t *testing.T) {
	e := newEnv(t)
	e.setAttributes(t, map[string]string{"kip-bootstrap": `{"cellID":"kip-1"}`, "kip-cell-sha256": ""})
	cfg := filepath.Join(e.dir, "instance_configs.cfg")
	const before = "[Accounts]\ndeprovision_remove = true\n"
	if err := os.WriteFile(cfg, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	script := withSettings(recipe(t, e.dir), "file://"+filepath.Join(e.dir, "release", "kip-cell-linux-{arch}"), e.sum())
	for range 2 {
		if out, err := e.run(script, "start"); err != nil {
			t.Fatalf("start: %v: %s", err, out)
		}
	}
	got, err := os.ReadFile(cfg)
	if want := before + "\n[IpForwarding]\nip_aliases = false\n"; err != nil || string(got) != want {
		t.Errorf("instance_configs.cfg after two boots:\n%s(%v)\nwant:\n%s", got, err, want)
	}
	restarts, _ := os.ReadFile(filepath.Join(e.dir, "systemctl.log"))
	if string(restarts) != "try-restart google-guest-agent.service\n" {
		t.Errorf("systemctl calls %q, want one restart of the guest agent", restarts)
	}
}
