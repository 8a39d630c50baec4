package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top directory, seen from this package.
const root = "../.."

// The benchmark pages: the current figures and every run before them.
const (
	benchmarks = "docs/benchmarks.md"
	history    = "docs/benchmarks-history.md"
)

// pendingAnchors are anchors of docs/benchmarks.md that its summary table
// links to before their section is merged from another branch, with the
// section each stands for. Once the section is in, the anchor resolves and
// TestBenchmarkLinksResolve fails until it is removed from here.
var pendingAnchors = map[string]string{}

// page is a Markdown file as this test reads it.
type page struct {
	path    string   // relative to root, slash-separated
	lines   []string // every line
	code    []bool   // whether each line is in a fenced or indented code block
	anchors map[string]bool
}

// readPage reads path (relative to root) and finds its code blocks and
// anchors.
func readPage(t *testing.T, path string) *page {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	p := &page{path: path, lines: strings.Split(string(b), "\n"), anchors: map[string]bool{}}
	p.code = make([]bool, len(p.lines))
	fenced, prevBlank := false, true
	counts := map[string]int{}
	for i, l := range p.lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			fenced = !fenced
			p.code[i] = true
		case fenced:
			p.code[i] = true
		case strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t"):
			// An indented code block starts after a blank line and goes
			// on while lines stay indented (or blank).
			p.code[i] = prevBlank || (i > 0 && p.code[i-1])
		case atxHeading.MatchString(l):
			a := slug(atxHeading.FindStringSubmatch(l)[1])
			if n := counts[a]; n > 0 {
				p.anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[a] = true
			}
			counts[a]++
		}
		if !p.code[i] {
			for _, m := range explicitAnchor.FindAllStringSubmatch(l, -1) {
				p.anchors[m[1]] = true
			}
		}
		prevBlank = strings.TrimSpace(l) == ""
	}
	return p
}

// atxHeading is a heading line, # to ######, its text without closing #s.
var atxHeading = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)

// explicitAnchor is an HTML anchor a page may set by hand.
var explicitAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)

// slug is the anchor GitHub gives a heading: its text without Markdown's
// code and emphasis marks, lower-cased, every character that is not a
// letter, mark, number, connector (such as _), space or hyphen dropped, and
// spaces turned into hyphens.
func slug(heading string) string {
	heading = strings.NewReplacer("`", "", "*", "").Replace(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-', unicode.IsLetter(r), unicode.IsMark(r), unicode.IsNumber(r), unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	tests := []struct {
		heading, want string
	}{
		{"Plugin round trip", "plugin-round-trip"},
		{"Scale (issue 19): a burst of N pods on one node, virtual-kubelet's mock beside kip", "scale-issue-19-a-burst-of-n-pods-on-one-node-virtual-kubelets-mock-beside-kip"},
		{"N = 1,000: kip beside the mock, the verdicts (2026-11-29)", "n--1000-kip-beside-the-mock-the-verdicts-2026-11-29"},
		{"High availability: takeover after the leader's kill -9", "high-availability-takeover-after-the-leaders-kill--9"},
		{"What changed to get there (2026-11-28/29)", "what-changed-to-get-there-2026-11-2829"},
		{"The `kip_cells` metric → *what* it means", "the-kip_cells-metric--what-it-means"},
		{"Disks", "disks"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// mdLink is a Markdown link or image outside code: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// link is one link of a page.
type link struct {
	line   int    // 1-based
	file   string // the target file relative to root, slash-separated; the page itself for "#x"
	anchor string // without '#'; empty for none
}

// links lists the page's links to files of the repository (not URLs),
// outside code blocks and code spans.
func (p *page) links() []link {
	var out []link
	for i, l := range p.lines {
		if p.code[i] {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(withoutCodeSpans(l), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = p.path
			} else {
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), file)))
			}
			out = append(out, link{line: i + 1, file: file, anchor: anchor})
		}
	}
	return out
}

// codeSpan is an inline code span of one line.
var codeSpan = regexp.MustCompile("`[^`]*`")

// withoutCodeSpans blanks a line's code spans, so that a link quoted in
// one is not taken for a link.
func withoutCodeSpans(l string) string {
	return codeSpan.ReplaceAllStringFunc(l, func(s string) string { return strings.Repeat(" ", len(s)) })
}

// TestLinksResolve checks every relative link of every Markdown file of
// the repository (README.md, docs/, the plugins' and deploy's pages): a
// file that exists and, into a Markdown file, an anchor its page has, so
// that renaming a section breaks a test, not a reader's link.
func TestLinksResolve(t *testing.T) {
	pages := map[string]*page{}
	get := func(path string) *page {
		if pages[path] == nil {
			pages[path] = readPage(t, path)
		}
		return pages[path]
	}
	check := func(from *page, l link) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(l.file))); err != nil {
			t.Errorf("%s:%d links to %s, which does not exist", from.path, l.line, l.file)
			return
		}
		if l.anchor == "" || !strings.HasSuffix(l.file, ".md") {
			return
		}
		has := get(l.file).anchors[l.anchor]
		if pending, ok := pendingAnchors[l.anchor]; ok && l.file == benchmarks {
			if has {
				t.Errorf("%s:%d: #%s (%s) now resolves: remove it from pendingAnchors", from.path, l.line, l.anchor, pending)
			}
			return
		}
		if !has {
			t.Errorf("%s:%d links to %s#%s, a heading %s does not have", from.path, l.line, l.file, l.anchor, l.file)
		}
	}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin" || name == "dist" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p := get(filepath.ToSlash(rel))
		for _, l := range p.links() {
			check(p, l)
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the repository's Markdown files: %v", err)
	}
	if checked == 0 {
		t.Fatal("found no relative link at all: the link pattern is broken")
	}
}

// summaryRows returns the rows of the first table under docs/benchmarks.md's
// "How fast is Kip" heading, each split into its cells, with their line
// numbers. It fails the test if the heading or the table is missing.
func summaryRows(t *testing.T, p *page) (rows [][]string, lines []int) {
	t.Helper()
	start := -1
	for i, l := range p.lines {
		if l == "## How fast is Kip" {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s has no \"## How fast is Kip\" heading", p.path)
	}
	inTable := false
	for i := start + 1; i < len(p.lines); i++ {
		l := p.lines[i]
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			if strings.HasPrefix(l, "#") {
				break
			}
			continue
		}
		inTable = true
		if strings.HasPrefix(l, "|---") || strings.HasPrefix(l, "| what ") {
			continue
		}
		rows = append(rows, splitRow(l))
		lines = append(lines, i+1)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table under \"How fast is Kip\"", p.path)
	}
	return rows, lines
}

// splitRow splits a table row into its cells at the pipes that are not
// escaped (\|, which a command's regular expression uses).
func splitRow(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			cell.WriteString(`\|`)
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(l[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// commandSpan is a code span of the summary table that quotes a command.
var commandSpan = regexp.MustCompile("`((?:[A-Z0-9_]+=\\S+ )*(?:go test|make) [^`]*)`")

// TestBenchmarkSummary checks the "How fast is Kip" table: every row links
// to a section of the page, every command it quotes is the one its section
// shows, and what that command runs (a benchmark, a test, a make target)
// exists.
func TestBenchmarkSummary(t *testing.T) {
	p := readPage(t, benchmarks)
	blocks := map[string]bool{}
	for i, l := range p.lines {
		if p.code[i] {
			blocks[strings.TrimSpace(l)] = true
		}
	}
	rows, lines := summaryRows(t, p)
	commands := 0
	for r, cells := range rows {
		at := p.path + ":" + strconv.Itoa(lines[r])
		if len(cells) != 5 {
			t.Errorf("%s: %d cells, want 5 (what, Kip now, goal, peers, section and command)", at, len(cells))
			continue
		}
		local := 0
		for _, m := range mdLink.FindAllStringSubmatch(withoutCodeSpans(strings.Join(cells, " ")), -1) {
			if strings.HasPrefix(m[1], "#") {
				local++
			}
		}
		if local == 0 {
			t.Errorf("%s: row %q links to no section of the page", at, cells[0])
		}
		for _, m := range commandSpan.FindAllStringSubmatch(cells[4], -1) {
			cmd := strings.ReplaceAll(m[1], `\|`, "|")
			commands++
			if !blocks[cmd] {
				t.Errorf("%s: the command %q is in no code block of the page (its section shows the command it ran)", at, cmd)
			}
			checkRuns(t, at, cmd)
		}
	}
	if commands < 10 {
		t.Errorf("%s: the summary quotes %d commands; want one for each benchmark (at least 10)", p.path, commands)
	}
}

// flagValue finds a go test flag's value in a command: -name value or
// -name 'value'.
func flagValue(cmd, name string) (string, bool) {
	m := regexp.MustCompile(`(?:^| )-` + name + `(?:=| )('[^']*'|\S+)`).FindStringSubmatch(cmd)
	if m == nil {
		return "", false
	}
	return strings.Trim(m[1], "'"), true
}

// goPackage is the package directory a go test command names.
var goPackage = regexp.MustCompile(`(?:^| )\./([\w/.-]+?)/?(?: |$)`)

// checkRuns fails if what cmd runs is missing: the make target, or for go
// test, the package directory and, in its test files, a benchmark matching
// each alternative of -bench and a test matching each of -run (unless -run
// selects nothing, '^$').
func checkRuns(t *testing.T, at, cmd string) {
	t.Helper()
	if _, rest, ok := strings.Cut(cmd, "make "); ok && !strings.Contains(cmd, "go test") {
		target := strings.Fields(rest)[0]
		mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
		if err != nil {
			t.Fatalf("reading the Makefile: %v", err)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
			t.Errorf("%s: `make %s`: the Makefile has no target %s", at, target, target)
		}
		return
	}
	m := goPackage.FindStringSubmatch(cmd)
	if m == nil {
		t.Errorf("%s: %q names no package (./dir/)", at, cmd)
		return
	}
	dir := filepath.Join(root, filepath.FromSlash(m[1]))
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Errorf("%s: %q: no test files in %s", at, cmd, m[1])
		return
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		src.Write(b)
	}
	for _, kind := range []struct{ flag, prefix string }{{"bench", "Benchmark"}, {"run", "Test"}} {
		pattern, ok := flagValue(cmd, kind.flag)
		if !ok || pattern == "^$" {
			continue
		}
		names := regexp.MustCompile(`(?m)^func (`+kind.prefix+`\w*)\(`).FindAllStringSubmatch(src.String(), -1)
		for _, alt := range strings.Split(pattern, "|") {
			re, err := regexp.Compile(alt)
			if err != nil {
				t.Errorf("%s: %q: -%s %q: %v", at, cmd, kind.flag, alt, err)
				continue
			}
			found := false
			for _, n := range names {
				if re.MatchString(n[1]) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: %q: no %s in %s matches %q", at, cmd, kind.prefix, m[1], alt)
			}
		}
	}
}

func TestSplitRow(t *testing.T) {
	tests := []struct {
		row  string
		want []string
	}{
		{"| a | b |", []string{"a", "b"}},
		{"| x | `go test -bench 'A\\|B' ./p/` |", []string{"x", "`go test -bench 'A\\|B' ./p/`"}},
		{"| a | | c |", []string{"a", "", "c"}},
	}
	for _, tt := range tests {
		got := splitRow(tt.row)
		if strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
			t.Errorf("splitRow(%q) = %q, want %q", tt.row, got, tt.want)
		}
	}
}
