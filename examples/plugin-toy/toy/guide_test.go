package toy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// guide is Kip's plugin guide, whose walkthrough quotes this example. This
// test belongs to Kip's repository: in a copy of the example, delete it.
const guide = "../../../docs/plugins.md"

// quoted finds the guide's quotes: a marker naming a file of the
// repository, then a fenced code block.
var quoted = regexp.MustCompile("(?s)<!-- quote: (\\S+) -->\n```[a-z]*\n(.*?)```")

// TestGuideQuotesTheExample keeps the walkthrough of docs/plugins.md true:
// every block it quotes from the example is, verbatim, in the file it
// names.
func TestGuideQuotesTheExample(t *testing.T) {
	doc, err := os.ReadFile(guide)
	if err != nil {
		t.Fatalf("reading the guide: %v", err)
	}
	quotes := quoted.FindAllSubmatch(doc, -1)
	if len(quotes) < 5 {
		t.Fatalf("%s has %d quotes of the example; want the walkthrough's (at least 5)", guide, len(quotes))
	}
	for _, q := range quotes {
		path, block := string(q[1]), string(q[2])
		src, err := os.ReadFile(filepath.Join("../../..", path))
		if err != nil {
			t.Errorf("%s quotes %s: %v", guide, path, err)
			continue
		}
		if !strings.Contains(string(src), block) {
			t.Errorf("%s quotes %s, which does not hold:\n%s", guide, path, block)
		}
	}
}
