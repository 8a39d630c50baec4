package azure

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recipePath is the cells' boot recipe, the plugin's customData.
const recipePath = "../../deploy/azure/cloud-init.yaml"

// recipeFile returns a file of the boot recipe's write_files (the block
// under its "content: |", as cloud-init writes it).
func recipeFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(recipePath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "- path: "+path {
			continue
		}
		// permissions, "content: |", then the block indented by 6.
		var out []string
		for _, b := range lines[i+3:] {
			if b != "" && !strings.HasPrefix(b, "      ") {
				break
			}
			out = append(out, strings.TrimPrefix(b, "      "))
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("the boot recipe has no %s", path)
	return ""
}

// stubIMDS stands in for curl: Azure's IMDS URLs are read from $MDDIR (a
// missing file is curl -f's 404, exit 22; a request without Metadata:
// true is refused as IMDS refuses it), file:// URLs are copied, -o writes
// the answer to a file.
const stubIMDS = `#!/bin/sh
out=; url=; md=
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift ;;
    -H) [ "$2" = "Metadata: true" ] && md=1; shift ;;
    --retry) shift ;;
    -*) ;;
    *) url=$1 ;;
  esac
  shift
done
case "$url" in
  http://169.254.169.254/metadata/*)
    [ -n "$md" ] || exit 22
    p=${url#http://169.254.169.254/metadata/}
    case "$p" in *"api-version="*"format=text"*) ;; *) exit 22 ;; esac
    src="$MDDIR/${p%%\?*}"
    [ -f "$src" ] || exit 22 ;;
  file://*) src=${url#file://} ;;
  *) exit 6 ;;
esac
if [ -n "$out" ]; then cp "$src" "$out"; else cat "$src"; fi
`

// bootEnv is a cell for the recipe's start-cell: IMDS's answers, the
// release it downloads from, the settings file, stubs for curl, dpkg and
// iptables on PATH.
type bootEnv struct {
	dir   string
	agent []byte
}

func newBootEnv(t *testing.T, userData, sumAMD64 string) bootEnv {
	t.Helper()
	dir := t.TempDir()
	e := bootEnv{dir: dir, agent: []byte("#!/bin/sh\necho \"$@\" > " + filepath.Join(dir, "agent-args") + "\n")}
	env := strings.NewReplacer(
		"KIP_CELL_URL=https://github.com/kipcell/kip/releases/download/v0.1.0/kip-cell-linux-{arch}", "KIP_CELL_URL=file://"+filepath.Join(dir, "release", "kip-cell-linux-{arch}"),
		"KIP_CELL_SHA256_AMD64=\n", "KIP_CELL_SHA256_AMD64="+strings.ReplaceAll(sumAMD64, "good", e.sum())+"\n",
	).Replace(recipeFile(t, "/etc/kip/cell.env"))
	files := map[string]string{
		"release/kip-cell-linux-amd64":                                      string(e.agent),
		"md/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress": "10.1.0.7",
		"stubs/curl":     stubIMDS,
		"stubs/dpkg":     "#!/bin/sh\necho amd64\n",
		"stubs/iptables": "#!/bin/sh\n[ \"$1\" = -C ] && exit 1\necho \"$@\" >> " + filepath.Join(dir, "iptables.log") + "\n",
		"cell.env":       env,
	}
	if userData != "" {
		files["md/instance/compute/userData"] = userData
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

func (e bootEnv) sum() string {
	s := sha256.Sum256(e.agent)
	return hex.EncodeToString(s[:])
}

// run runs the recipe's start-cell, its paths moved under e.dir (and its
// minute of waiting after a failure cut), with the stubs first on PATH.
func (e bootEnv) run(t *testing.T) ([]byte, error) {
	t.Helper()
	script := strings.NewReplacer(
		"/etc/kip/cell.env", e.dir+"/cell.env",
		"/usr/local/bin/", e.dir+"/bin/",
		"/run/kip", e.dir+"/run",
		"/dev/console", e.dir+"/console",
		"sleep 60", "true",
	).Replace(recipeFile(t, "/usr/local/lib/kip/start-cell"))
	cmd := exec.Command("sh", "-c", script, "start-cell")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(e.dir, "stubs")+":"+os.Getenv("PATH"), "MDDIR="+filepath.Join(e.dir, "md"))
	return cmd.CombinedOutput()
}

// The recipe reads the bootstrap from IMDS's userData (base64, as the
// plugin writes it), saves it readable by root only, closes IMDS to pods,
// installs kip-cell only with the right SHA-256, and runs it with the
// bootstrap and the VM's private address.
func TestBootRecipe(t *testing.T) {
	for _, bin := range []string{"sha256sum", "base64"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("the boot recipe needs %s (coreutils): %v", bin, err)
		}
	}
	const bootstrap = `{"version":1,"cellID":"kip-1","joinToken":"t"}`
	encoded := base64.StdEncoding.EncodeToString([]byte(bootstrap))
	other := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name     string
		userData string
		sum      string // KIP_CELL_SHA256_AMD64; "good" is the agent's
		wantMsg  string // "" for success
	}{
		{name: "right sum", userData: encoded, sum: "good"},
		{name: "no sum", userData: encoded, wantMsg: "no SHA-256 for kip-cell on amd64"},
		{name: "another sum", userData: encoded, sum: other, wantMsg: "does not have the SHA-256 " + other},
		{name: "no userData", sum: "good", wantMsg: "cannot read the VM's userData"},
		{name: "userData not base64", userData: "{not base64}", sum: "good", wantMsg: "is not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBootEnv(t, tc.userData, tc.sum)
			out, err := e.run(t)
			installed, statErr := os.ReadFile(filepath.Join(e.dir, "bin", "kip-cell"))
			if tc.wantMsg != "" {
				if err == nil || !strings.Contains(string(out), tc.wantMsg) {
					t.Fatalf("the recipe: %v, %q; want a failure saying %q", err, out, tc.wantMsg)
				}
				if statErr == nil {
					t.Error("a refused kip-cell was installed, or one was installed without a bootstrap")
				}
				return
			}
			if err != nil || statErr != nil || string(installed) != string(e.agent) {
				t.Fatalf("err %v, output %q, installed %q (%v)", err, out, installed, statErr)
			}
			saved := filepath.Join(e.dir, "run", "bootstrap.json")
			got, err := os.ReadFile(saved)
			if err != nil || string(got) != bootstrap {
				t.Errorf("saved bootstrap %q (%v); want %q", got, err, bootstrap)
			}
			if fi, err := os.Stat(saved); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("the bootstrap's mode is %v (%v); want 0600", fi.Mode().Perm(), err)
			}
			args, err := os.ReadFile(filepath.Join(e.dir, "agent-args"))
			want := "--bootstrap " + saved + " --pod-ip 10.1.0.7 --containerd-address /run/containerd/containerd.sock --imds-endpoint none\n"
			if err != nil || string(args) != want {
				t.Errorf("kip-cell ran with %q (%v); want %q", args, err, want)
			}
			rules, err := os.ReadFile(filepath.Join(e.dir, "iptables.log"))
			if err != nil || !strings.Contains(string(rules), "-I OUTPUT -d 169.254.169.254 -m cgroup ! --path system.slice -j DROP") {
				t.Errorf("IMDS was not closed to pods: %q (%v)", rules, err)
			}
		})
	}
}
