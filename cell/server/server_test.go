package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api/cellv1"
)

// TestApplyPodRefusesAPodAddress: an agent that gives no pod a network
// namespace of its own (a light cell's: pod.Config.Network nil) answers a
// pod address with UNIMPLEMENTED and takes nothing, so that the host
// sends the pod again resolved for the cell's address, the one the pod
// will have; without one it takes the pod.
func TestApplyPodRefusesAPodAddress(t *testing.T) {
	s, mgr := newTestServer(t)
	data, _ := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "reg/main:v1"}}}})
	_, err := s.ApplyPod(t.Context(), &cellv1.ApplyPodRequest{PodJson: data, Generation: 1, PodAddress: "10.0.0.10"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ApplyPod with a pod address = %v, want Unimplemented", err)
	}
	if uid := mgr.PodUID(); uid != "" {
		t.Errorf("the refused pod %s was taken", uid)
	}
	resp, err := s.ApplyPod(t.Context(), &cellv1.ApplyPodRequest{PodJson: data, Generation: 1})
	if err != nil || resp.GetGeneration() != 1 || mgr.PodUID() != "u1" {
		t.Errorf("ApplyPod without = %v, %v (pod %q); want generation 1 taken", resp, err, mgr.PodUID())
	}
}

// The agent sends output in messages of at most MaxChunk, whatever a
// writer is given at once, so that kip takes every one of them
// (host/cellclient.MaxAgentMessage).
func TestOutputInChunks(t *testing.T) {
	for _, size := range []int{0, 1, MaxChunk, MaxChunk + 1, 3*MaxChunk + 5} {
		p := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
		var got [][]byte
		n, err := inChunks(p, func(b []byte) error { got = append(got, b); return nil })
		if err != nil || n != size {
			t.Errorf("%d bytes: wrote %d, %v", size, n, err)
		}
		if want := (size + MaxChunk - 1) / MaxChunk; len(got) != want {
			t.Errorf("%d bytes: %d messages, want %d", size, len(got), want)
		}
		for _, b := range got {
			if len(b) > MaxChunk {
				t.Errorf("%d bytes: a message of %d", size, len(b))
			}
		}
		clear(p) // the messages are copies, sent later
		if joined := bytes.Join(got, nil); size > 0 && !bytes.Equal(joined, bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]) {
			t.Errorf("%d bytes: the messages do not hold what was written", size)
		}
	}
}
