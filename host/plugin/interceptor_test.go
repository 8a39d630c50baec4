package plugin

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
)

// recordedCall is one call a callRecorder was told of.
type recordedCall struct{ method, outcome string }

// callRecorder is a CallObserver that records the calls.
type callRecorder struct {
	mu    sync.Mutex
	calls []recordedCall
}

func (r *callRecorder) PluginCall(method, outcome string, d time.Duration) {
	if d < 0 {
		panic("negative duration")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, recordedCall{method, outcome})
}

func (r *callRecorder) recorded() []recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedCall(nil), r.calls...)
}

// intercepted serves p over an in-memory gRPC connection whose client
// has UnaryInterceptor(obs).
func intercepted(t *testing.T, p pluginapi.Provider, obs CallObserver) pluginapi.Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(pluginapi.GRPCServerOptions()...)
	pluginapi.RegisterGRPCServer(srv, p)
	go srv.Serve(lis) //nolint:errcheck // Serve returns when the server stops.
	opts := append(pluginapi.GRPCDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithChainUnaryInterceptor(UnaryInterceptor(obs)))
	cc, err := grpc.NewClient("passthrough:///interceptor", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
	})
	return pluginapi.NewGRPCClient(cc)
}

func TestUnaryInterceptorOutcomes(t *testing.T) {
	tests := []struct {
		name string
		fail error // the fake's next Launch error; nil: none
		want string
	}{
		{name: "ok", want: "ok"},
		{name: "insufficient capacity", fail: pluginapi.NewInsufficientCapacity("fake.small", "fake-a", pluginapi.CapacitySpot, "none"), want: "insufficient_capacity"},
		{name: "quota", fail: pluginapi.NewQuotaExceeded("vCPU"), want: "quota_exceeded"},
		{name: "throttled", fail: pluginapi.NewThrottled(time.Second, "slow down"), want: "throttled"},
		{name: "invalid config", fail: pluginapi.NewInvalidConfig("subnet", "no such subnet"), want: "invalid_config"},
		{name: "unsupported", fail: pluginapi.NewUnsupported("gpus"), want: "unsupported"},
		{name: "transient", fail: pluginapi.NewTransient("try again"), want: "transient"},
		{name: "not found", fail: pluginapi.NewNotFound("image"), want: "not_found"},
		{name: "not configured", fail: pluginapi.NewNotConfigured("no"), want: "not_configured"},
		{name: "an error of no kind", fail: errors.New("boom"), want: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New()
			rec := &callRecorder{}
			client := intercepted(t, p, rec)
			ctx := t.Context()
			if _, err := client.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "c1", NodeName: "n1"}); err != nil {
				t.Fatal(err)
			}
			if tt.fail != nil {
				p.FailNext("Launch", tt.fail)
			}
			_, err := client.Launch(ctx, launchReq("cell-a"))
			if (err != nil) != (tt.fail != nil) {
				t.Fatalf("Launch error = %v, want one: %v", err, tt.fail != nil)
			}
			want := []recordedCall{{"Configure", "ok"}, {"Launch", tt.want}}
			if diff := cmp.Diff(want, rec.recorded(), cmp.AllowUnexported(recordedCall{})); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutcomeOfContextAndUnreachable(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{pluginapi.ErrorFromStatus(errUnavailable()), "unreachable"},
	}
	for _, tt := range tests {
		if got := Outcome(tt.err); got != tt.want {
			t.Errorf("Outcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// errUnavailable is the error of a call to a plugin process that is gone.
func errUnavailable() error {
	cc, err := grpc.NewClient("passthrough:///gone", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return nil, errors.New("no process") }))
	if err != nil {
		return err
	}
	defer cc.Close()
	return cc.Invoke(context.Background(), "/kip.plugin.v1.Provider/List", nil, nil)
}

func TestSupervisorReportsCalls(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	cfg := testConfig(t, path)
	rec := &callRecorder{}
	cfg.Calls = rec
	s := open(t, cfg)
	if _, err := s.Client().List(t.Context(), &pluginapi.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range rec.recorded() {
		seen[c.method+" "+c.outcome] = true
	}
	for _, want := range []string{"GetInfo ok", "Configure ok", "List ok"} {
		if !seen[want] {
			t.Errorf("call %q not observed; observed %v", want, rec.recorded())
		}
	}
}
