package podrefs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingSource serves ConfigMaps and Secrets from maps (absent: NotFound,
// or err when set) and counts its reads by "kind/namespace/name".
type countingSource struct {
	mu    sync.Mutex
	data  map[string]string // the value of key "v" of each object
	err   error
	reads map[string]int
}

func (s *countingSource) read(kind, ns, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := kind + "/" + ns + "/" + name
	s.reads[k]++
	if s.err != nil {
		return "", s.err
	}
	v, ok := s.data[k]
	if !ok {
		return "", apierrors.NewNotFound(schema.GroupResource{Resource: kind}, name)
	}
	return v, nil
}

func (s *countingSource) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	v, err := s.read("ConfigMap", ns, name)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"v": v}}, nil
}

func (s *countingSource) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	v, err := s.read("Secret", ns, name)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"v": []byte(v)}}, nil
}

func (s *countingSource) ServiceAccountToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	_, _ = s.read("Token", ns, sa)
	return req, nil
}

func TestCache(t *testing.T) {
	type step struct {
		at     time.Duration // the clock, from the start
		fresh  bool          // read through Fresh, else Cached
		kind   string        // ConfigMap, Secret or Token
		set    string        // the object's value in the API from now ("" leaves it)
		delete bool          // the object is gone from the API from now
		want   string        // the value read ("" with wantNotFound)
		reads  int           // the API reads of the object so far
	}
	const ttl = 30 * time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{"a refresh within the TTL takes what a first resolution read", []step{
			{at: 0, fresh: true, kind: "ConfigMap", set: "a", want: "a", reads: 1},
			{at: 10 * time.Second, kind: "ConfigMap", set: "b", want: "a", reads: 1},
			{at: 29 * time.Second, kind: "ConfigMap", want: "a", reads: 1},
			{at: 30 * time.Second, kind: "ConfigMap", want: "b", reads: 2},
			{at: 31 * time.Second, kind: "ConfigMap", want: "b", reads: 2},
		}},
		{"a first resolution always reads the API, and its read serves the refreshes", []step{
			{at: 0, kind: "Secret", set: "a", want: "a", reads: 1},
			{at: time.Second, fresh: true, kind: "Secret", set: "b", want: "b", reads: 2},
			{at: 2 * time.Second, kind: "Secret", want: "b", reads: 2},
		}},
		{"a deleted object is seen NotFound once its entry is past the TTL", []step{
			{at: 0, fresh: true, kind: "ConfigMap", set: "a", want: "a", reads: 1},
			{at: time.Second, kind: "ConfigMap", delete: true, want: "a", reads: 1},
			{at: 40 * time.Second, kind: "ConfigMap", reads: 2},
			{at: 41 * time.Second, kind: "ConfigMap", reads: 3}, // NotFound is not kept
		}},
		{"tokens are never kept", []step{
			{at: 0, fresh: true, kind: "Token", reads: 1},
			{at: time.Second, kind: "Token", reads: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &countingSource{data: map[string]string{}, reads: map[string]int{}}
			var now time.Time
			start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			c := NewCache(src, ttl, func() time.Time { return now })
			for i, s := range tt.steps {
				now = start.Add(s.at)
				key := s.kind + "/ns/obj"
				if s.set != "" {
					src.data[key] = s.set
				}
				if s.delete {
					delete(src.data, key)
				}
				from := c.Cached()
				if s.fresh {
					from = c.Fresh()
				}
				var got string
				var err error
				switch s.kind {
				case "ConfigMap":
					var cm *corev1.ConfigMap
					if cm, err = from.ConfigMap(t.Context(), "ns", "obj"); err == nil {
						got = cm.Data["v"]
					}
				case "Secret":
					var sec *corev1.Secret
					if sec, err = from.Secret(t.Context(), "ns", "obj"); err == nil {
						got = string(sec.Data["v"])
					}
				case "Token":
					_, err = from.ServiceAccountToken(t.Context(), "ns", "obj", &authenticationv1.TokenRequest{})
				}
				if s.want == "" && s.kind != "Token" {
					if !apierrors.IsNotFound(err) {
						t.Fatalf("step %d: err = %v, want NotFound", i, err)
					}
				} else if err != nil || got != s.want {
					t.Fatalf("step %d: got %q, %v; want %q", i, got, err, s.want)
				}
				if n := src.reads[key]; n != s.reads {
					t.Fatalf("step %d: %d reads of the API, want %d", i, n, s.reads)
				}
			}
		})
	}
}

// TestCacheErrorsAreNotKept: a failed read answers its error and the next
// refresh reads again.
func TestCacheErrorsAreNotKept(t *testing.T) {
	src := &countingSource{data: map[string]string{"ConfigMap/ns/obj": "a"}, reads: map[string]int{}, err: errors.New("connection refused")}
	c := NewCache(src, time.Minute, nil)
	if _, err := c.Cached().ConfigMap(t.Context(), "ns", "obj"); err == nil {
		t.Fatal("a failed read answered no error")
	}
	src.err = nil
	cm, err := c.Cached().ConfigMap(t.Context(), "ns", "obj")
	if err != nil || cm.Data["v"] != "a" {
		t.Fatalf("after the failure: %v, %v", cm, err)
	}
	if n := src.reads["ConfigMap/ns/obj"]; n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
}

// TestCacheSweeps: entries past the TTL are dropped, so that objects no
// pod reads any longer are not kept.
func TestCacheSweeps(t *testing.T) {
	src := &countingSource{data: map[string]string{"ConfigMap/ns/a": "a", "ConfigMap/ns/b": "b"}, reads: map[string]int{}}
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	c := NewCache(src, time.Minute, func() time.Time { return now })
	if _, err := c.Fresh().ConfigMap(t.Context(), "ns", "a"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := c.Fresh().ConfigMap(t.Context(), "ns", "b"); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 1 {
		t.Errorf("%d objects kept, want 1 (a is past its TTL)", n)
	}
}
