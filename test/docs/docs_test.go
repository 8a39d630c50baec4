package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kipcell/kip/host/cli"
)

// maxReadmeWords is what a newcomer reads in about ten minutes (issue 32).
const maxReadmeWords = 1800

// TestReadmeIsShort counts README.md's words as wc -w does.
func TestReadmeIsShort(t *testing.T) {
	text := read(t, "README.md")
	if n := len(strings.Fields(text)); n > maxReadmeWords {
		t.Errorf("README.md has %d words, more than %d: move the detail to a page of docs/ and link it", n, maxReadmeWords)
	}
}

// TestDocsIndexListsEveryPage checks that docs/README.md links every other
// page of docs/.
func TestDocsIndexListsEveryPage(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	indexed := map[string]bool{}
	for _, l := range readPage(t, "docs/README.md").links() {
		indexed[strings.TrimPrefix(l.file, "docs/")] = true
	}
	for _, p := range pages {
		if name := filepath.Base(p); name != "README.md" && !indexed[name] {
			t.Errorf("docs/README.md does not list docs/%s: add a line saying what it holds", name)
		}
	}
}

// TestReadmeMakeTargets checks that every `make <target>` README.md quotes
// is a target of the Makefile.
func TestReadmeMakeTargets(t *testing.T) {
	targets := makeTargets(read(t, "Makefile"))
	quoted := regexp.MustCompile(`(?m)(?:^|[\x60\s(])make\s+(?:-s\s+)?([a-z][a-z0-9-]*)`).FindAllStringSubmatch(codeOnly(read(t, "README.md")), -1)
	if len(quoted) == 0 {
		t.Fatal("README.md quotes no make target: the pattern is broken")
	}
	for _, m := range quoted {
		if !targets[m[1]] {
			t.Errorf("README.md quotes `make %s`, which is no target of the Makefile", m[1])
		}
	}
}

// TestReadmeCommands checks every command README.md quotes that starts with
// one of Kip's binaries: the binary has a main package under a cmd/
// directory of the repository, and for kip itself the subcommand is one
// kip's usage lists.
func TestReadmeCommands(t *testing.T) {
	usage := kipUsage(t)
	binary := regexp.MustCompile(`^(?:bin/)?(kip(?:-[a-z0-9]+)*)$`)
	var seen []string
	for _, cmd := range commands(read(t, "README.md")) {
		words := strings.Fields(cmd)
		m := binary.FindStringSubmatch(words[0])
		if m == nil {
			continue
		}
		seen = append(seen, cmd)
		name := m[1]
		dirs, err := filepath.Glob(filepath.Join(root, "*", "cmd", name))
		if err != nil {
			t.Fatal(err)
		}
		top, err := filepath.Glob(filepath.Join(root, "cmd", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(dirs)+len(top) == 0 {
			t.Errorf("README.md quotes `%s`: no cmd/%s in the repository", cmd, name)
			continue
		}
		if name != "kip" || len(words) == 1 {
			continue // a binary named, not run
		}
		sub := subcommand(words[1:])
		if !slices.Contains(usage, sub) {
			t.Errorf("README.md quotes `%s`: kip has no command %q (its usage lists %q)", cmd, sub, usage)
		}
	}
	if len(seen) == 0 {
		t.Fatal("README.md quotes no kip command: the pattern is broken")
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}

var fence = regexp.MustCompile("(?ms)^```.*?^```[ \t]*$")

// codeOnly is text's fenced code blocks and inline code spans, one a line.
func codeOnly(text string) string {
	var b strings.Builder
	for _, block := range fence.FindAllString(text, -1) {
		b.WriteString(block)
		b.WriteByte('\n')
	}
	for _, span := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		b.WriteString(span[1])
		b.WriteByte('\n')
	}
	return b.String()
}

// makeTargets returns the targets the Makefile's rules define.
func makeTargets(makefile string) map[string]bool {
	targets := map[string]bool{}
	rule := regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:([^=]|$)`)
	for _, line := range strings.Split(makefile, "\n") {
		if m := rule.FindStringSubmatch(line); m != nil {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
		}
	}
	return targets
}

// commands returns the commands text quotes: each line of a fenced shell
// block (without its comment) and each inline code span.
func commands(text string) []string {
	var out []string
	for _, block := range fence.FindAllString(text, -1) {
		lines := strings.Split(block, "\n")
		if !strings.HasPrefix(lines[0], "```sh") {
			continue
		}
		for _, line := range lines[1 : len(lines)-1] {
			line, _, _ = strings.Cut(line, "#")
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	for _, span := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		if s := strings.TrimSpace(span[1]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// kipUsage returns the commands kip's usage lists ("run", "plugins list",
// ...), read from `kip help`.
func kipUsage(t *testing.T) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Run(t.Context(), []string{"help"}, cli.Env{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("kip help: exit status %d: %s", code, stderr.String())
	}
	var usage []string
	for _, m := range regexp.MustCompile(`(?m)^\s+kip ((?:[a-z]+ ?)+)`).FindAllStringSubmatch(stdout.String()+stderr.String(), -1) {
		usage = append(usage, strings.TrimSpace(m[1]))
	}
	if len(usage) == 0 {
		t.Fatalf("kip help lists no command:\n%s%s", stdout.String(), stderr.String())
	}
	return usage
}

// subcommand returns the words of a kip command line that name its
// command: those before the first flag, argument in capitals or other
// word kip's usage would not spell in lower case.
func subcommand(args []string) string {
	var words []string
	for _, w := range args {
		if !regexp.MustCompile(`^[a-z]+$`).MatchString(w) || len(words) == 2 {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}
