package cells

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// apiSource is the API a pod's references are read from: Secrets the test
// changes, and numbered tokens living as long as asked, by the test's
// clock. It counts the resolutions (token requests and Secret reads).
type apiSource struct {
	now func() time.Time

	mu      sync.Mutex
	secrets map[string]map[string][]byte
	tokens  int
	reads   int
}

func (s *apiSource) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (s *apiSource) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	data, ok := s.secrets[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return &corev1.Secret{Data: data}, nil
}

func (s *apiSource) ServiceAccountToken(_ context.Context, _, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens++
	out := req.DeepCopy()
	out.Status.Token = fmt.Sprintf("%s#%d", sa, s.tokens)
	out.Status.ExpirationTimestamp = metav1.NewTime(s.now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func (s *apiSource) setSecret(name string, data map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if data == nil {
		delete(s.secrets, name)
		return
	}
	s.secrets[name] = data
}

func (s *apiSource) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// refreshHarness runs a Manager whose pods refresh their volumes every few
// milliseconds, on a clock the test moves, reading src.
func refreshHarness(t *testing.T, agentGen int64) (*harness, *apiSource, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	src := &apiSource{now: clk.Now, secrets: map[string]map[string][]byte{"creds": {"k": []byte("v1")}}}
	h := newHarnessSetup(t, setup{source: src, agentGen: agentGen, config: func(c *Config) {
		c.Now = clk.Now
		c.VolumeRefreshInterval = refreshInterval
	}})
	h.start(t)
	return h, src, clk
}

// secretsPod has a Secret volume and a token that lives ten minutes.
func secretsPod() *corev1.Pod {
	pod := newPod("web", "uid-r")
	pod.Spec.ServiceAccountName = "robot"
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}},
		}}}},
	}
	return pod
}

// agentFiles is what the agent took last: volume/file → content, and
// the generation.
func (h *harness) agentFiles() (map[string]string, int64) {
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	out := map[string]string{}
	for vol, files := range h.agent.volumes {
		for p, data := range files.Files {
			out[vol+"/"+p] = string(data)
		}
	}
	return out, h.agent.gen
}

// refreshInterval is refreshHarness's VolumeRefreshInterval.
const refreshInterval = 5 * time.Millisecond

// waitReads waits until the pod's references have been read from the API
// n more times: the cell has resolved the pod again. Each look moves clk
// by a refresh interval, so that the refreshes' cache (podrefs.Cache,
// half an interval) lets them read the API.
func waitReads(t *testing.T, src *apiSource, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	from := src.readCount()
	eventually(t, fmt.Sprintf("%d more resolutions", n), func() bool {
		clk.Step(refreshInterval)
		return src.readCount() >= from+n
	})
}

// eventuallyTicking is eventually with clk moved by a refresh interval at
// each look (waitReads).
func eventuallyTicking(t *testing.T, clk *clocktesting.FakeClock, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, func() bool {
		clk.Step(refreshInterval)
		return cond()
	})
}

func startRefreshPod(t *testing.T, h *harness) {
	t.Helper()
	pod := secretsPod()
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

// A running pod's token is refreshed at 80 % of its lifetime, not before,
// and reaches the agent under a new generation; in between, resolving the
// pod again sends nothing.
func TestTokenIsRefreshedOnTheRunningPod(t *testing.T) {
	h, src, clk := refreshHarness(t, 0)
	startRefreshPod(t, h)
	files, gen := h.agentFiles()
	if files["token/token"] != "robot#1" || files["creds/k"] != "v1" || gen != 1 {
		t.Fatalf("agent took %v at generation %d, want token robot#1 and creds v1 at 1", files, gen)
	}

	clk.Step(8*time.Minute - time.Second)
	waitReads(t, src, clk, 3)
	if files, gen := h.agentFiles(); files["token/token"] != "robot#1" || gen != 1 {
		t.Errorf("before 80 %% of the token's life: agent took %v at generation %d, want robot#1 at 1 still", files, gen)
	}

	clk.Step(time.Second)
	eventually(t, "the refreshed token at the agent", func() bool {
		files, _ := h.agentFiles()
		return files["token/token"] == "robot#2"
	})
	if files, gen := h.agentFiles(); files["creds/k"] != "v1" || gen != 2 {
		t.Errorf("after the refresh: agent took %v at generation %d, want creds v1 at 2", files, gen)
	}
}

// A Secret that changes reaches the running pod's volume; one that goes
// away leaves the pod running with the files it has and a FailedMount
// event, once.
func TestSecretVolumeFollowsItsSecret(t *testing.T) {
	h, src, clk := refreshHarness(t, 0)
	startRefreshPod(t, h)

	src.setSecret("creds", map[string][]byte{"k": []byte("v2")})
	eventuallyTicking(t, clk, "the changed Secret at the agent", func() bool {
		files, _ := h.agentFiles()
		return files["creds/k"] == "v2"
	})

	h.events() // drop what came before
	src.setSecret("creds", nil)
	waitReads(t, src, clk, 5)
	if files, _ := h.agentFiles(); files["creds/k"] != "v2" {
		t.Errorf("after the Secret went away, agent has %v, want the last files", files)
	}
	if ev := h.events(); strings.Count(ev, ReasonFailedMount) != 1 || !strings.Contains(ev, `secret "creds" not found`) {
		t.Errorf("events = %q, want one FailedMount naming the Secret", ev)
	}
	pod, err := h.m.GetPod(t.Context(), "default", "web")
	if err != nil || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("pod = %v, %v; want it Running on", pod, err)
	}

	src.setSecret("creds", map[string][]byte{"k": []byte("v3")})
	eventuallyTicking(t, clk, "the Secret, back, at the agent", func() bool {
		files, _ := h.agentFiles()
		return files["creds/k"] == "v3"
	})
}

// The refreshes of an unchanged pod take the Secret read within half a
// refresh interval (podrefs.Cache): while the clock stands, ten intervals
// of refreshes read the API at most once.
func TestRefreshesShareTheirReads(t *testing.T) {
	h, src, _ := refreshHarness(t, 0)
	startRefreshPod(t, h)
	from := src.readCount()
	time.Sleep(10 * refreshInterval)
	if n := src.readCount() - from; n > 1 {
		t.Errorf("%d reads of the Secret in ten refreshes while the clock stood, want at most 1", n)
	}
}

// An agent that an earlier kip process talked to is ahead of a new
// process's generations: the pod is sent again past its generation, so
// that it takes what this process resolves (refreshed tokens included).
func TestAdoptedAgentIsSentPastItsGeneration(t *testing.T) {
	h, _, _ := refreshHarness(t, 5)
	startRefreshPod(t, h)
	eventually(t, "generation 6 taken", func() bool {
		files, gen := h.agentFiles()
		return gen == 6 && files["token/token"] != ""
	})
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	if got := h.agent.applied[:2]; got[0] != 1 || got[1] != 6 {
		t.Errorf("applied generations %v, want 1 (ignored) then 6", h.agent.applied)
	}
}

// advance moves the generation past the agent's for the pod it was
// resolved from, and refuses when the desired pod changed meanwhile (the
// change then goes under its own generation, past the agent's too).
func TestAdvance(t *testing.T) {
	for _, tc := range []struct {
		name           string
		current        int64 // the cell's generation
		from, past     int64
		want           int64
		wantOK         bool
		wantGeneration int64 // the cell's generation after
	}{
		{"a refresh of the current pod", 3, 3, 3, 4, true, 4},
		{"an agent ahead", 1, 1, 5, 6, true, 6},
		{"the pod changed during a refresh", 4, 3, 3, 0, false, 4},
		{"the pod changed, the agent ahead of it", 2, 1, 5, 0, false, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCell(&cellDeps{log: slog.New(slog.DiscardHandler)}, newPod("p", "uid-a"), nil)
			c.generation = tc.current
			got, ok := c.advance(tc.from, tc.past)
			if got != tc.want || ok != tc.wantOK || c.generation != tc.wantGeneration {
				t.Errorf("advance(%d, %d) at %d = %d, %v, then %d; want %d, %v, then %d",
					tc.from, tc.past, tc.current, got, ok, c.generation, tc.want, tc.wantOK, tc.wantGeneration)
			}
		})
	}
}
