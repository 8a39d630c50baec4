package troubleshooting

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// page is the troubleshooting page, relative to this package.
const page = "../../docs/troubleshooting.md"

// traced are the reason arguments the scan cannot follow, each checked by
// hand: the comment says where its values come from, and those places
// are scanned. A new untraced argument fails the test until it is
// followed here (or, better, made a constant the scan sees).
var traced = map[string]string{
	// The DNS warnings of the pod's /etc files: warning{ReasonMissingClusterDNS, …}
	// and warning{ReasonDNSConfigForming, …} in cell/pod/dns.go.
	"cell/pod.syncEtc: w.Reason": "cell/pod/dns.go",
	// The first of the reasons admission refused the pod for: each
	// refuse(Reason…Forbidden, …) call in host/cells/admit.go.
	"host/cells.admit: reasons[0]": "host/cells/admit.go",
	// The cell agent's events, passed on to the API server as they are:
	// every emit and emitLocked of cell/pod.
	"host/cells.agentEvents: e.Reason": "cell/pod",
	// The event of a volume that cannot be given to the cell: the
	// volumes.Error's Event (volumes.EventFailedMount) or
	// ReasonFailedAttachVolume (host/cells/disks.go diskEvent).
	"host/cells.resolveUntil: diskEvent(verr)": "host/cells/disks.go",
	"host/cells.placeDisks: diskEvent(verr)":   "host/cells/disks.go",
	// An image volume's pull failure kept as the waiting reason of the
	// containers that mount it: reasonErrImagePull or the reason pull.go
	// gave (cell/pod/imagevolumes.go, pull.go).
	"cell/pod.ensureImageVolume: v.reason": "cell/pod/imagevolumes.go",
	// An ephemeral container kip's admission refuses: the reason of
	// admitEphemeral, one of the Reason…Forbidden of host/cells/admit.go,
	// kept in refusedContainer.reason for its event and its status.
	"host/cells.withoutRefusedEphemeral: rc[i].reason": "host/cells/admit.go",
	"host/cells.addRefusedEphemeralLocked: r.reason":   "host/cells/admit.go",
}

// dependencies are the reasons that a module kip runs posts on kip's
// objects, which Scan does not read, each list checked by hand against
// the module's version in go.mod: the test fails when go.mod requires
// another, until the list is checked again.
var dependencies = []struct {
	module, version, where string
	reasons                []string
}{{
	// node/pod.go's PodController posts an event on the pod for each
	// create, update and delete it hands to kip (host/cells/pods.go).
	// kip's CreatePod and UpdatePod never fail, so ProviderCreateFailed,
	// ProviderUpdateFailed and the status reason ProviderFailed do not
	// occur; DeletePod is NotFound for a pod whose cell is gone.
	module: "github.com/virtual-kubelet/virtual-kubelet", version: "v1.13.0", where: "node/pod.go",
	reasons: []string{"ProviderCreateSuccess", "ProviderUpdateSuccess", "ProviderDeleteSuccess", "ProviderDeleteFailed"},
}}

// TestPageCoversEveryReason fails when docs/troubleshooting.md has no
// heading for a reason kip emits, or a heading for one it does not.
func TestPageCoversEveryReason(t *testing.T) {
	res, err := Scan("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reasons) < 50 {
		t.Fatalf("the scan found only %d reasons; it no longer sees kip's events", len(res.Reasons))
	}
	for _, u := range res.Untraced {
		if _, ok := traced[u.Key]; !ok {
			t.Errorf("%s: cannot follow the reason %q to a constant or literal: make it a Reason… constant, or follow it by hand in traced", u.Pos, u.Key)
		}
	}
	for key := range traced {
		if !slices.ContainsFunc(res.Untraced, func(u Untraced) bool { return u.Key == key }) {
			t.Errorf("traced lists %q, which the code no longer has: remove it", key)
		}
	}

	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range dependencies {
		if !strings.Contains(string(gomod), "\t"+dep.module+" "+dep.version+"\n") {
			t.Errorf("go.mod no longer requires %s %s: check the events of its %s and update dependencies", dep.module, dep.version, dep.where)
		}
		for _, r := range dep.reasons {
			res.Reasons[r] = append(res.Reasons[r], dep.module+"@"+dep.version+" "+dep.where)
		}
	}

	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	documented := headingReasons(string(text))
	for reason, at := range res.Reasons {
		if !documented[reason] {
			t.Errorf("docs/troubleshooting.md has no heading for the reason %s, emitted at %s: add one (what it means, what to do)", reason, strings.Join(at, ", "))
		}
	}
	for reason := range documented {
		if _, ok := res.Reasons[reason]; !ok {
			t.Errorf("docs/troubleshooting.md has a heading for %s, which kip does not emit: remove it or say where it comes from", reason)
		}
	}
}

var codeSpan = regexp.MustCompile("`([A-Za-z]+)`")

// headingReasons returns the words in code spans of the page's headings
// of level 3 and below: "### `FailedMount`" documents FailedMount.
func headingReasons(md string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "###") {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestScan checks what the scan follows on small programs.
func TestScan(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		reasons  []string
		untraced []string
	}{{
		name: "a Reason constant used, even where the scan cannot follow it",
		src: `package cells
const ReasonCellLost = "CellLost"
const EventReason = "Unsatisfiable"
const message = "not a reason"
var warnings = []warning{{ReasonCellLost, message}, {EventReason, message}}`,
		reasons: []string{"CellLost", "Unsatisfiable"},
	}, {
		name: "a Reason constant only declared is emitted nowhere",
		src: `package cells
const ReasonCellTerminated = "CellTerminated"`,
	}, {
		name: "a literal passed to a recorder",
		src: `package cells
func f(r recorder) { r.Eventf(pod, "Warning", "FailedMount", "%s", "x"); r.Event(pod, "Normal", "Pulled", "x") }`,
		reasons: []string{"FailedMount", "Pulled"},
	}, {
		name: "through a helper's parameter and a closure",
		src: `package cells
func (c *cell) event(kind, reason, format string) { c.recorder.Eventf(c.pod, kind, reason, format) }
func (c *cell) fail(why, reason string) { c.setStatus(func(st *PodStatus) { c.event("Warning", reason, why) }) }
func (c *cell) run() { c.fail("no room", "NoRoom") }`,
		reasons: []string{"NoRoom"},
	}, {
		name: "a local variable and a function's results",
		src: `package pod
func pullFailure(err error) (string, string) {
	if err == nil {
		return "ErrImageNeverPull", "never"
	}
	return "ErrImagePull", err.Error()
}
func f(err error) {
	reason, msg := pullFailure(err)
	other := "Completed"
	if err != nil {
		other = "Error"
	}
	_ = ContainerStateWaiting{Reason: reason, Message: msg}
	_ = corev1.ContainerStateTerminated{Reason: other}
}`,
		reasons: []string{"Completed", "ErrImageNeverPull", "ErrImagePull", "Error"},
	}, {
		name: "a status Reason field set, and a constant of another package",
		src: `package cells
func f(st *PodStatus) {
	st.Reason, st.Message = ReasonTerminated, "x"
	st.Reason = choices.ReasonChoiceForbidden
	st.Reason = corev1.PodReasonTerminationByKubelet
}
const ReasonTerminated = "Terminated"`,
		reasons: []string{"ChoiceForbidden", "Terminated", "TerminationByKubelet"},
	}, {
		name: "a field it cannot follow",
		src: `package cells
func forward(r recorder, e event) { r.Event(ref, "Normal", e.Reason, e.Message) }`,
		untraced: []string{"host/cells.forward: e.Reason"},
	}, {
		name: "a config error's Reason is no status",
		src: `package config
func f() error { return &Error{Key: "x", Reason: "unknown key"} }`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "host", "cells")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(tt.src, "choices.") {
				other := filepath.Join(root, "host", "choices")
				if err := os.MkdirAll(other, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(other, "c.go"), []byte("package choices\nconst ReasonChoiceForbidden = \"ChoiceForbidden\"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Scan(root)
			if err != nil {
				t.Fatal(err)
			}
			var reasons, untraced []string
			for r := range res.Reasons {
				reasons = append(reasons, r)
			}
			slices.Sort(reasons)
			for _, u := range res.Untraced {
				untraced = append(untraced, u.Key)
			}
			if diff := cmp.Diff(tt.reasons, reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.untraced, untraced); diff != "" {
				t.Errorf("untraced (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeadingReasons checks which words of the page count as documented.
func TestHeadingReasons(t *testing.T) {
	md := "# `Title`\n## `Section`\n### `FailedMount`\nbody `NotAHeading`\n#### `A`, `B` and `C`\n```\n### `InFence`\n```\n"
	want := map[string]bool{"FailedMount": true, "A": true, "B": true, "C": true}
	if diff := cmp.Diff(want, headingReasons(md)); diff != "" {
		t.Errorf("headingReasons (-want +got):\n%s", diff)
	}
}
