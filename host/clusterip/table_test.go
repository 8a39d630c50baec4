package clusterip

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	cellapi "github.com/kipcell/kip/cell/api"
)

// informed is a Table fed by informers over a fake clientset holding
// objs (Services and EndpointSlices), ready.
func informed(t *testing.T, objs ...runtime.Object) (*Table, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	tab, err := New(Config{NodeName: "kip", Recorder: recorder}, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	if err := tab.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	return tab, client, recorder
}

// waitRevision waits until the table's revision passes rev and returns
// the new one.
func waitRevision(t *testing.T, tab *Table, rev uint64) uint64 {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		now, changed := tab.Revision()
		if now > rev {
			return now
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the table stayed at revision %d", rev)
		}
	}
}

func keys(req *cellapi.ServicesUpdate) (services []string) {
	for _, s := range req.Services {
		services = append(services, s.Namespace+"/"+s.Name)
	}
	return services
}

func TestTableFollowsTheInformers(t *testing.T) {
	http := []discoveryv1.EndpointPort{port("http", "TCP", 8080)}
	webSlice := slice("web-a", "web", discoveryv1.AddressTypeIPv4, http, ep("10.1.0.5", ptr.To(true), ""))
	tab, client, _ := informed(t, service("web"), service("api"), webSlice.DeepCopy())

	// The first lists are in: the whole table.
	rev0, _ := tab.Revision()
	full := tab.Request(0, false)
	if diff := cmp.Diff([]string{"default/api", "default/web"}, keys(full)); diff != "" {
		t.Fatalf("whole table (-want +got):\n%s", diff)
	}
	if full.Table != tab.ID() || full.Revision != rev0 || full.BaseRevision != 0 {
		t.Errorf("whole table at %s/%d base %d, want %s/%d base 0", full.Table, full.Revision, full.BaseRevision, tab.ID(), rev0)
	}

	// A second ready endpoint: a delta with web alone.
	webSlice.Endpoints = append(webSlice.Endpoints, ep("10.1.0.6", ptr.To(true), ""))
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(t.Context(), webSlice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev1 := waitRevision(t, tab, rev0)
	delta := tab.Request(rev0, false)
	want := &cellapi.ServicesUpdate{Table: tab.ID(), Revision: rev1, BaseRevision: rev0, Services: []cellapi.Service{{
		Namespace: "default", Name: "web", ClusterIPs: []string{"10.0.0.10"},
		Ports: []cellapi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: []cellapi.ServiceEndpoint{
			{IP: "10.1.0.5", Port: 8080}, {IP: "10.1.0.6", Port: 8080},
		}}},
	}}}
	if diff := cmp.Diff(want, delta, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}

	// A change cells do not program (a label) is no revision; deleting a
	// Service is, and the delta names it removed.
	api, _ := client.CoreV1().Services("default").Get(t.Context(), "api", metav1.GetOptions{})
	api.Labels = map[string]string{"team": "x"}
	if _, err := client.CoreV1().Services("default").Update(t.Context(), api, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services("default").Delete(t.Context(), "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rev2 := waitRevision(t, tab, rev1)
	if rev2 != rev1+1 {
		t.Errorf("revision %d after a label change and a deletion, want %d (the label is no change)", rev2, rev1+1)
	}
	delta = tab.Request(rev1, false)
	if len(delta.Services) != 0 || !cmp.Equal(delta.Removed, []string{"default/api"}) {
		t.Errorf("delta after the deletion: services %v removed %v, want only default/api removed", keys(delta), delta.Removed)
	}
	// From the start, the delta holds web and the removal, not api's
	// intermediate states.
	delta = tab.Request(rev0, false)
	if !cmp.Equal(keys(delta), []string{"default/web"}) || !cmp.Equal(delta.Removed, []string{"default/api"}) {
		t.Errorf("delta since %d: services %v removed %v", rev0, keys(delta), delta.Removed)
	}
}

func TestTableWarnsOnceAboutSCTP(t *testing.T) {
	sctp := service("sig", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "sig", Protocol: corev1.ProtocolSCTP, Port: 3868})
	})
	tab, client, recorder := informed(t, sctp.DeepCopy())
	rev, _ := tab.Revision()
	sctp.Labels = map[string]string{"again": "yes"}
	if _, err := client.CoreV1().Services("default").Update(t.Context(), sctp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Let the update reach the table: create another Service after it.
	if _, err := client.CoreV1().Services("default").Create(t.Context(), service("marker"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRevision(t, tab, rev)
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if len(events) != 1 || !strings.Contains(events[0], ReasonSCTPNotSupported) || !strings.Contains(events[0], "port sig") {
		t.Errorf("events %q, want one %s naming port sig", events, ReasonSCTPNotSupported)
	}
	if req := tab.Request(0, true); !cmp.Equal(keys(req), []string{"default/marker", "default/sig"}) {
		t.Errorf("table %v: the Service's TCP port is still programmed", keys(req))
	}
}

func TestTableForgetsTombstonesPastTheLimit(t *testing.T) {
	tab := bare()
	tab.set("default/keep", &cellapi.Service{Namespace: "default", Name: "keep"})
	start, _ := tab.Revision()
	for i := range maxTombstones + 1 {
		key := "default/gone-" + strconv.Itoa(i)
		tab.set(key, &cellapi.Service{Name: key})
		tab.set(key, nil)
	}
	req := tab.Request(start, false)
	if req.BaseRevision != 0 || !cmp.Equal(keys(req), []string{"default/keep"}) {
		t.Errorf("a cell from before the tombstones were forgotten got base %d services %v, want the whole table", req.BaseRevision, keys(req))
	}
	now, _ := tab.Revision()
	if req := tab.Request(now, false); req.BaseRevision != now || len(req.Services)+len(req.Removed) != 0 {
		t.Errorf("a cell at the current revision got %v", req)
	}
}

// bare is a ready Table without informers, changed through set.
func bare() *Table {
	ready := make(chan struct{})
	close(ready)
	return &Table{id: "table-1", ready: ready, entries: map[string]entry{}, changed: make(chan struct{})}
}
