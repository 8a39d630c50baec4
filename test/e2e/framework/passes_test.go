package framework

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writePackage writes src as the only _test.go file of a new directory.
func writePackage(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

const planHeader = `//go:build e2e

package e2e

import (
	"testing"

	fw "github.com/kipcell/kip/test/e2e/framework"
)

`

func TestReadPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want map[string][]string
		err  string
	}{{
		name: "a test without a marker is the full pass's alone",
		src:  planHeader + "func TestCore(t *testing.T) { t.Log() }\nfunc TestMain(m *testing.M) {}\nfunc helper(t *testing.T) {}\n",
		want: map[string][]string{"TestCore": {"local"}},
	}, {
		name: "a file the e2e build leaves out",
		src:  strings.Replace(planHeader, "//go:build e2e", "//go:build !e2e", 1) + "func TestPlan(t *testing.T) { fw.PluginPath(t) }\n",
		want: map[string][]string{},
	}, {
		name: "the markers",
		src: planHeader + `
func TestPlugin(t *testing.T) { fw.PluginPath(t); t.Log() }
func TestHA(t *testing.T) { fw.AlsoIn(t, fw.PluginAWS, "adopts EC2 instances") }
func TestEC2(t *testing.T) { fw.Only(t, fw.PluginAWS) }
func TestSims(t *testing.T) { fw.Only(t, fw.PluginAzure, "gce", fw.PluginAWS) }
`,
		want: map[string][]string{
			"TestPlugin": {"local", "aws", "gce", "azure"},
			"TestHA":     {"local", "aws"},
			"TestEC2":    {"aws"},
			"TestSims":   {"aws", "gce", "azure"},
		},
	}, {
		name: "a marker in a helper would lose the test's cloud passes",
		src:  planHeader + "func TestA(t *testing.T) { needEC2(t) }\nfunc needEC2(t *testing.T) { fw.Only(t, fw.PluginAWS) }\n",
		err:  "fw.Only in needEC2: a marker belongs in a Test function",
	}, {
		name: "a marker after the first statement",
		src:  planHeader + "func TestA(t *testing.T) { t.Log(); fw.PluginPath(t) }\n",
		err:  "fw.PluginPath in TestA: a marker must be the function's first statement",
	}, {
		name: "a marker inside a subtest",
		src:  planHeader + "func TestA(t *testing.T) { t.Run(\"x\", func(t *testing.T) { fw.PluginPath(t) }) }\n",
		err:  "fw.PluginPath in TestA: a marker must be the function's first statement",
	}, {
		name: "Only names no cloud",
		src:  planHeader + "func TestA(t *testing.T) { fw.Only(t) }\n",
		err:  "fw.Only in TestA: names no cloud",
	}, {
		name: "a cloud by a variable",
		src:  planHeader + "func TestA(t *testing.T) { fw.Only(t, cloud) }\n",
		err:  "not cloud",
	}, {
		name: "the local plugin is no cloud",
		src:  planHeader + "func TestA(t *testing.T) { fw.AlsoIn(t, \"local\", \"why\") }\n",
		err:  `not "local"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ReadPlan(writePackage(t, tc.src))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadPlan: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, name := range p.Tests() {
				got[name] = p.PassesOf(name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("passes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanSelect(t *testing.T) {
	p, err := ReadPlan(writePackage(t, planHeader+`
func TestCore(t *testing.T) {}
func TestPlugin(t *testing.T) { fw.PluginPath(t) }
func TestEC2(t *testing.T) { fw.Only(t, fw.PluginAWS) }
func TestGCE(t *testing.T) { fw.Only(t, fw.PluginGCE) }
`))
	if err != nil {
		t.Fatal(err)
	}
	skip := flag.Lookup("test.skip")
	was := skip.Value.String()
	t.Cleanup(func() { _ = skip.Value.Set(was) })
	for _, tc := range []struct {
		pass  string
		all   bool
		given string
		want  string
	}{
		{pass: "local", want: "^(TestEC2|TestGCE)$"},
		{pass: "aws", want: "^(TestCore|TestGCE)$"},
		{pass: "aws", all: true, want: "^(TestGCE)$"},
		{pass: "gce", given: "TestPlugin", want: "TestPlugin|^(TestCore|TestEC2)$"},
	} {
		if err := skip.Value.Set(tc.given); err != nil {
			t.Fatal(err)
		}
		if err := p.Select(tc.pass, tc.all, io.Discard); err != nil {
			t.Fatal(err)
		}
		if got := skip.Value.String(); got != tc.want {
			t.Errorf("pass %s (all %v, -skip %q): -test.skip %q, want %q", tc.pass, tc.all, tc.given, got, tc.want)
		}
	}
	if err := p.Select("ec2", false, io.Discard); err == nil || !strings.Contains(err.Error(), "KIP_E2E_PLUGIN=ec2 is none of local, aws, gce, azure") {
		t.Errorf("Select(ec2): %v, want an error naming the passes", err)
	}
}
