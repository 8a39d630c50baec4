package gce

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// Label values: a valid value is itself; anything else is lowercased, its
// invalid characters replaced, and suffixed with a hash, at most 63
// characters; different values stay different.
func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, tc := range []struct{ in, want string }{
		{"test-cluster", "test-cluster"},
		{"kip-0c6b3e0e-5d47-4a8f-9f3c-1f2e3d4c5b6a", "kip-0c6b3e0e-5d47-4a8f-9f3c-1f2e3d4c5b6a"},
		{"", ""},
		{"under_score", "under_score"},
		{"Prod", "prod-" + labelValue("Prod")[5:]},
		{"node.example.com", "node-example-com-" + labelValue("node.example.com")[17:]},
	} {
		if got := labelValue(tc.in); got != tc.want {
			t.Errorf("labelValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"Prod", "prod!", "PROD", "node.example.com", "node-example-com", long, long + "b", "ünïcode"} {
		got := labelValue(in)
		if len(got) > maxLabelLen || !labelVal.MatchString(got) {
			t.Errorf("labelValue(%q) = %q: not a label value", in, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("labelValue(%q) = labelValue(%q) = %q", in, prev, got)
		}
		seen[got] = in
		if again := labelValue(in); again != got {
			t.Errorf("labelValue(%q) is not deterministic", in)
		}
	}
}

// The exact tags round-trip through kip-tags; without it the standard
// tags come back from the labels.
func TestTagsRoundTrip(t *testing.T) {
	tags := map[string]string{pluginapi.TagCluster: "Cluster.One", pluginapi.TagCell: "kip-1", "kipcell.io/extra": "x y"}
	if diff := cmp.Diff(tags, decodeTags(encodeTags(tags), nil)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	labels := map[string]string{labelCluster: "c", labelCell: "kip-1", "team": "x"}
	want := map[string]string{pluginapi.TagCluster: "c", pluginapi.TagCell: "kip-1"}
	if diff := cmp.Diff(want, decodeTags("", labels)); diff != "" {
		t.Errorf("from labels (-want +got):\n%s", diff)
	}
}

// requestID is a UUID, the same for the same parts, different otherwise.
func TestRequestID(t *testing.T) {
	a := requestID("instances.insert", "p", "z", "kip-1", "e2-small", "spot")
	if a != requestID("instances.insert", "p", "z", "kip-1", "e2-small", "spot") {
		t.Error("not deterministic")
	}
	if a == requestID("instances.insert", "p", "z", "kip-1", "e2-small", "on-demand") || a == requestID("instances.insert", "p", "z2", "kip-1", "e2-small", "spot") {
		t.Error("another offering has the same requestId")
	}
	if len(a) != 36 || a[14] != '5' || !strings.ContainsRune("89ab", rune(a[19])) || strings.Count(a, "-") != 4 {
		t.Errorf("%q is not a version-5 layout UUID", a)
	}
}
