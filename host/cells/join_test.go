package cells

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

// refusingIdentity refuses the first refusals joins as an expired token
// would, then asks the check (the plugin's identity check) and signs.
type refusingIdentity struct {
	fakeIdentity
	mu       sync.Mutex
	refusals int
}

func (r *refusingIdentity) Join(ctx context.Context, cellID string, _ cellapi.JoinRequest, check func(context.Context) error) ([]byte, error) {
	r.mu.Lock()
	refuse := r.refusals > 0
	r.refusals--
	r.mu.Unlock()
	if refuse {
		return nil, fmt.Errorf("%w: cell %s: the join token expired", cellapi.ErrJoinRefused, cellID)
	}
	if err := check(ctx); err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", cellapi.ErrJoinRefused, cellID, err)
	}
	return []byte("certificate"), nil
}

// TestCellJoinsBeforeItIsServed: the host joins a cell before it dials
// it, saying each distinct refusal once (CellJoinFailed) and trying again
// until the join succeeds; the plugin checks the instance identity the
// agent sent.
func TestCellJoinsBeforeItIsServed(t *testing.T) {
	h := newHarness(t)
	h.m.deps.identity = &refusingIdentity{refusals: 3}
	var (
		mu       sync.Mutex
		attempts int
	)
	h.m.deps.join = func(ctx context.Context, cellID, _ string, _ *tls.Config, _ []byte, sign cellclient.JoinSigner) (cellclient.Joined, error) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		resp, err := h.plugin.List(ctx, &pluginapi.ListRequest{})
		if err != nil {
			return cellclient.Joined{}, err
		}
		var id string
		for _, in := range resp.Instances {
			if in.Tags[pluginapi.TagCell] == cellID {
				id = in.ID
			}
		}
		// The agent sends a forged identity at first, its own after.
		req := cellapi.JoinRequest{IdentityDocument: pluginfake.IdentityDocument("i-forged"), IdentitySignature: pluginfake.IdentitySignature("i-forged")}
		if n > 5 {
			req = cellapi.JoinRequest{IdentityDocument: pluginfake.IdentityDocument(id), IdentitySignature: pluginfake.IdentitySignature(id)}
		}
		if _, err := sign(ctx, req); err != nil {
			return cellclient.Joined{}, fmt.Errorf("joining cell %s: %w", cellID, err)
		}
		return cellclient.Joined{Now: true}, nil
	}
	h.start(t)
	pod := newPod("web", "uid-1")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	mu.Lock()
	defer mu.Unlock()
	if attempts != 6 {
		t.Errorf("%d join attempts, want 6: three refused tokens, two forged identities, then the join", attempts)
	}
	var failed []string
	for _, e := range strings.Split(h.events(), "\n") {
		if strings.Contains(e, ReasonCellJoinFailed) {
			failed = append(failed, e)
		}
	}
	if len(failed) != 2 || !strings.Contains(failed[0], "the join token expired") || !strings.Contains(failed[1], "is not instance") {
		t.Errorf("CellJoinFailed events:\n%s\nwant one for the expired token, one for the forged identity", strings.Join(failed, "\n"))
	}
	verified := 0
	for _, r := range h.plugin.Requests() {
		if r.Method == "VerifyInstanceIdentity" {
			verified++
		}
	}
	if verified != 3 {
		t.Errorf("the plugin checked %d identities, want 3", verified)
	}
}
