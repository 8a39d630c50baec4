package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
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
	_, err := s.ApplyPod(t.Context(), &api.PodRequest{PodJSON: data, Generation: 1, PodAddress: "10.0.0.10"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ApplyPod with a pod address = %v, want Unimplemented", err)
	}
	if uid := mgr.PodUID(); uid != "" {
		t.Errorf("the refused pod %s was taken", uid)
	}
	gen, err := s.ApplyPod(t.Context(), &api.PodRequest{PodJSON: data, Generation: 1})
	if err != nil || gen != 1 || mgr.PodUID() != "u1" {
		t.Errorf("ApplyPod without = %v, %v (pod %q); want generation 1 taken", gen, err, mgr.PodUID())
	}
}

// recordedOutput is an exec stream's sending end that records what is
// sent.
type recordedOutput struct{ sent []*api.ExecOutput }

func (r *recordedOutput) Send(o *api.ExecOutput) error {
	r.sent = append(r.sent, o)
	return nil
}

// The agent sends exec output in messages of at most api.MaxChunk,
// whatever a writer is given at once, so that kip takes every one of them
// (host/cellclient.MaxAgentMessage). Logs are chunked by api.RegisterCell's
// writer.
func TestOutputInChunks(t *testing.T) {
	for _, stderr := range []bool{false, true} {
		for _, size := range []int{0, 1, api.MaxChunk, api.MaxChunk + 1, 3*api.MaxChunk + 5} {
			p := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
			rec := &recordedOutput{}
			n, err := (&execSender{stream: rec}).writer(stderr).Write(p)
			if err != nil || n != size {
				t.Errorf("stderr %v, %d bytes: wrote %d, %v", stderr, size, n, err)
			}
			if want := (size + api.MaxChunk - 1) / api.MaxChunk; len(rec.sent) != want {
				t.Errorf("stderr %v, %d bytes: %d messages, want %d", stderr, size, len(rec.sent), want)
			}
			var got [][]byte
			for _, o := range rec.sent {
				b, other := o.Stdout, o.Stderr
				if stderr {
					b, other = o.Stderr, o.Stdout
				}
				if len(other) > 0 || o.Exit != nil {
					t.Errorf("stderr %v, %d bytes: a message %+v on the wrong stream", stderr, size, o)
				}
				if len(b) > api.MaxChunk {
					t.Errorf("stderr %v, %d bytes: a message of %d", stderr, size, len(b))
				}
				got = append(got, b)
			}
			clear(p) // the messages are copies, sent later
			if joined := bytes.Join(got, nil); size > 0 && !bytes.Equal(joined, bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]) {
				t.Errorf("stderr %v, %d bytes: the messages do not hold what was written", stderr, size)
			}
		}
	}
}
