package serviceenv

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func service(ns, name, ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
}

func names(list []*corev1.Service) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// start runs an Informer over client until the test ends and waits for
// its first list.
func start(t *testing.T, i *Informer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = i.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := i.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if !i.HasSynced() {
		t.Fatal("HasSynced is false after WaitForSync")
	}
}

func TestListAndGet(t *testing.T) {
	client := fake.NewClientset(
		service("default", "kubernetes", "10.0.0.1"),
		service("b", "web", "10.0.0.20"),
		service("b", "api", "10.0.0.21"),
		service("kube-system", "kube-dns", "10.0.0.10"),
	)
	i := New(informers.NewSharedInformerFactory(client, 0), nil)
	start(t, i)

	tests := []struct {
		namespace string
		want      []string
	}{
		{"b", []string{"b/api", "b/web"}},
		{"default", []string{"default/kubernetes"}},
		{"empty", nil},
		{"", []string{"b/api", "b/web", "default/kubernetes", "kube-system/kube-dns"}},
	}
	for _, tt := range tests {
		list, err := i.List(tt.namespace)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, names(list)); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", tt.namespace, diff)
		}
	}

	svc, err := i.Get("kube-system", "kube-dns")
	if err != nil || svc.Spec.ClusterIP != "10.0.0.10" {
		t.Errorf("Get(kube-system, kube-dns) = %v, %v; want the Service with 10.0.0.10", svc, err)
	}
	if _, err := i.Get("kube-system", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing Service: %v, want NotFound", err)
	}
}

func TestOnChange(t *testing.T) {
	client := fake.NewClientset(service("a", "first", "10.0.0.2"))
	i := New(informers.NewSharedInformerFactory(client, 0), nil)
	changes := make(chan Change, 10)
	stop := i.OnChange(func(c Change) { changes <- c })
	start(t, i)

	next := func() Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("no change reported")
			return Change{}
		}
	}
	// A handler added before Run hears of the first list.
	if c := next(); c.Namespace != "a" || c.Name != "first" || c.Service == nil {
		t.Errorf("first change = %+v, want a/first added", c)
	}

	ctx := t.Context()
	if _, err := client.CoreV1().Services("a").Create(ctx, service("a", "second", "10.0.0.3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Name != "second" || c.Service == nil || c.Service.Spec.ClusterIP != "10.0.0.3" {
		t.Errorf("after a create: %+v, want a/second with 10.0.0.3", c)
	}
	if err := client.CoreV1().Services("a").Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Name != "first" || c.Service != nil {
		t.Errorf("after a delete: %+v, want a/first with no Service", c)
	}

	// Once stopped, the handler hears nothing more: a second handler
	// proves the change was delivered.
	stop()
	other := make(chan Change, 1)
	i.OnChange(func(c Change) { other <- c })
	if _, err := client.CoreV1().Services("a").Create(ctx, service("a", "third", "10.0.0.4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other:
	case <-time.After(30 * time.Second):
		t.Fatal("the second handler heard nothing")
	}
	select {
	case c := <-changes:
		t.Errorf("a stopped handler was called with %+v", c)
	default:
	}
}
