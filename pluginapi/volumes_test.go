package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// overGRPC serves p on an in-memory gRPC server and returns a Client
// connected to it, as plugintest.Serve does (which this package's tests
// cannot import).
func overGRPC(t *testing.T, p Provider) Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(GRPCServerOptions()...)
	RegisterGRPCServer(srv, p)
	go srv.Serve(lis) //nolint:errcheck // Serve returns when the test stops the server.
	opts := append(GRPCDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
	)
	cc, err := grpc.NewClient("passthrough:///volumes-test", opts...)
	if err != nil {
		t.Fatalf("creating the gRPC client: %v", err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
	})
	return NewGRPCClient(cc)
}

// volumeStub is a provider whose volume calls record their requests and
// answer what the test set. Calls other than GetInfo, Configure and the
// volume calls panic (nil Provider).
type volumeStub struct {
	Provider
	info *GetInfoResponse

	mu       sync.Mutex
	requests []any // in order
	attach   *AttachVolumeResponse
	describe *DescribeVolumeAttachmentsResponse
	err      error
}

func (s *volumeStub) GetInfo(context.Context, *GetInfoRequest) (*GetInfoResponse, error) {
	return s.info, nil
}

func (s *volumeStub) Configure(context.Context, *ConfigureRequest) (*ConfigureResponse, error) {
	return &ConfigureResponse{}, nil
}

func (s *volumeStub) record(req any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

func (s *volumeStub) seen() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]any(nil), s.requests...)
}

func (s *volumeStub) AttachVolume(_ context.Context, req *AttachVolumeRequest) (*AttachVolumeResponse, error) {
	s.record(req)
	if s.err != nil {
		return nil, s.err
	}
	return s.attach, nil
}

func (s *volumeStub) DetachVolume(_ context.Context, req *DetachVolumeRequest) (*DetachVolumeResponse, error) {
	s.record(req)
	if s.err != nil {
		return nil, s.err
	}
	return &DetachVolumeResponse{}, nil
}

func (s *volumeStub) DescribeVolumeAttachments(_ context.Context, req *DescribeVolumeAttachmentsRequest) (*DescribeVolumeAttachmentsResponse, error) {
	s.record(req)
	if s.err != nil {
		return nil, s.err
	}
	return s.describe, nil
}

const stubDriver = "ebs.csi.aws.com"

func volumesInfo() *GetInfoResponse {
	return &GetInfoResponse{
		Name: "stub", Version: "1", APIVersions: []string{"1.2"},
		Capabilities: []Capability{CapabilityVolumes}, VolumeDrivers: []string{stubDriver},
	}
}

// configuredOverGRPC serves p and configures it.
func configuredOverGRPC(t *testing.T, p Provider) Client {
	t.Helper()
	c := overGRPC(t, p)
	if _, err := c.Configure(t.Context(), &ConfigureRequest{ClusterID: "cl"}); err != nil {
		t.Fatalf("configuring: %v", err)
	}
	return c
}

// Every volume call carries its request and answer across the wire
// unchanged.
func TestVolumeCallsRoundTrip(t *testing.T) {
	ctx := t.Context()
	attachment := VolumeAttachment{
		InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-0abc", State: AttachmentAttached,
		ReadOnly: true, Device: VolumeDevice{Serial: "vol0abc", Path: "/dev/xvdf"},
	}
	described := []VolumeAttachment{
		attachment,
		{InstanceID: "i-2", Driver: stubDriver, VolumeHandle: "vol-0def", State: AttachmentAttaching},
		{InstanceID: "i-2", Driver: stubDriver, VolumeHandle: "vol-0123", State: AttachmentDetaching, Device: VolumeDevice{Serial: "vol0123"}},
	}
	stub := &volumeStub{
		info:     volumesInfo(),
		attach:   &AttachVolumeResponse{Attachment: attachment},
		describe: &DescribeVolumeAttachmentsResponse{Attachments: described},
	}
	c := configuredOverGRPC(t, stub)

	attachReq := &AttachVolumeRequest{InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-0abc", ReadOnly: true}
	resp, err := c.AttachVolume(ctx, attachReq)
	if err != nil {
		t.Fatalf("AttachVolume: %v", err)
	}
	if !reflect.DeepEqual(resp.Attachment, attachment) {
		t.Errorf("AttachVolume answered %+v, want %+v", resp.Attachment, attachment)
	}
	detachReq := &DetachVolumeRequest{InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-0abc"}
	if _, err := c.DetachVolume(ctx, detachReq); err != nil {
		t.Fatalf("DetachVolume: %v", err)
	}
	describeReq := &DescribeVolumeAttachmentsRequest{InstanceIDs: []string{"i-1", "i-2", "i-3"}}
	dresp, err := c.DescribeVolumeAttachments(ctx, describeReq)
	if err != nil {
		t.Fatalf("DescribeVolumeAttachments: %v", err)
	}
	if !reflect.DeepEqual(dresp.Attachments, described) {
		t.Errorf("DescribeVolumeAttachments answered %+v, want %+v", dresp.Attachments, described)
	}
	if got, want := stub.seen(), []any{attachReq, detachReq, describeReq}; !reflect.DeepEqual(got, want) {
		t.Errorf("the provider got %+v, want %+v", got, want)
	}
}

// A VolumeConflictError from each volume call reaches the host whole.
func TestVolumeConflictOverGRPC(t *testing.T) {
	ctx := t.Context()
	conflict := &VolumeConflictError{Reason: ConflictInUse, VolumeHandle: "vol-0abc", InstanceID: "i-other", Message: "attached to i-other"}
	stub := &volumeStub{info: volumesInfo(), err: fmt.Errorf("attaching vol-0abc to i-1: %w", conflict)}
	c := configuredOverGRPC(t, stub)
	_, err := c.AttachVolume(ctx, &AttachVolumeRequest{InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-0abc"})
	var got *VolumeConflictError
	if !errors.As(err, &got) || !reflect.DeepEqual(got, conflict) {
		t.Fatalf("AttachVolume's conflict after the wire = %v (%T), want %#v", err, err, conflict)
	}
	if want := "attaching vol-0abc to i-1: volume vol-0abc in-use: attached to i-other"; err.Error() != want {
		t.Errorf("text after the wire = %q, want %q", err.Error(), want)
	}
}

// The SDK's server answers the volume calls itself when the plugin cannot
// take them, without calling the provider.
func TestServerRefusesVolumeCalls(t *testing.T) {
	noVolumes := &GetInfoResponse{Name: "stub", Version: "1", APIVersions: []string{"1.2"}}
	calls := map[string]func(context.Context, Client, string) error{
		"AttachVolume": func(ctx context.Context, c Client, driver string) error {
			_, err := c.AttachVolume(ctx, &AttachVolumeRequest{InstanceID: "i-1", Driver: driver, VolumeHandle: "vol-1"})
			return err
		},
		"DetachVolume": func(ctx context.Context, c Client, driver string) error {
			_, err := c.DetachVolume(ctx, &DetachVolumeRequest{InstanceID: "i-1", Driver: driver, VolumeHandle: "vol-1"})
			return err
		},
		"DescribeVolumeAttachments": func(ctx context.Context, c Client, _ string) error {
			_, err := c.DescribeVolumeAttachments(ctx, &DescribeVolumeAttachmentsRequest{InstanceIDs: []string{"i-1"}})
			return err
		},
	}
	tests := []struct {
		name       string
		provider   func(*volumeStub) Provider
		info       *GetInfoResponse
		configure  bool
		driver     string
		wantCalls  []string // the calls refused; the others reach the provider
		wantField  string
		wantNotCfg bool
	}{
		{
			name: "not configured", provider: func(s *volumeStub) Provider { return s }, info: volumesInfo(), driver: stubDriver,
			wantCalls: []string{"AttachVolume", "DetachVolume", "DescribeVolumeAttachments"}, wantNotCfg: true,
		},
		{
			name: "no VolumeAttacher", provider: func(s *volumeStub) Provider { return struct{ Provider }{s} }, info: volumesInfo(),
			configure: true, driver: stubDriver, wantCalls: []string{"AttachVolume", "DetachVolume", "DescribeVolumeAttachments"},
		},
		{
			name: "no capability", provider: func(s *volumeStub) Provider { return s }, info: noVolumes,
			configure: true, driver: stubDriver, wantCalls: []string{"AttachVolume", "DetachVolume", "DescribeVolumeAttachments"},
		},
		{
			name: "a driver the plugin does not attach", provider: func(s *volumeStub) Provider { return s }, info: volumesInfo(),
			configure: true, driver: "efs.csi.aws.com", wantCalls: []string{"AttachVolume", "DetachVolume"}, wantField: FieldVolumeDriver,
		},
		{
			name: "no driver", provider: func(s *volumeStub) Provider { return s }, info: volumesInfo(),
			configure: true, driver: "", wantCalls: []string{"AttachVolume", "DetachVolume"}, wantField: FieldVolumeDriver,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			stub := &volumeStub{
				info:     tt.info,
				attach:   &AttachVolumeResponse{Attachment: VolumeAttachment{InstanceID: "i-1", Driver: tt.driver, VolumeHandle: "vol-1", State: AttachmentAttaching}},
				describe: &DescribeVolumeAttachmentsResponse{},
			}
			c := overGRPC(t, tt.provider(stub))
			if tt.configure {
				if _, err := c.Configure(ctx, &ConfigureRequest{ClusterID: "cl"}); err != nil {
					t.Fatal(err)
				}
			}
			for name, call := range calls {
				err := call(ctx, c, tt.driver)
				refused := strings.Contains(strings.Join(tt.wantCalls, " "), name)
				var u *UnsupportedError
				switch {
				case !refused && err != nil:
					t.Errorf("%s = %v, want it to reach the provider and succeed", name, err)
				case refused && tt.wantNotCfg:
					if !IsNotConfigured(err) || !strings.Contains(err.Error(), name+" called before a successful Configure") {
						t.Errorf("%s = %v, want NotConfigured naming the call", name, err)
					}
				case refused && (!errors.As(err, &u) || u.Field != tt.wantField):
					t.Errorf("%s = %v, want Unsupported with field %q", name, err, tt.wantField)
				}
			}
			wantReached := 3 - len(tt.wantCalls)
			if got := len(stub.seen()); got != wantReached {
				t.Errorf("%d volume calls reached the provider (%+v), want %d", got, stub.seen(), wantReached)
			}
		})
	}
}

// The client rejects a plugin's volume answers it cannot trust.
func TestClientRejectsInvalidVolumeAnswers(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name   string
		attach VolumeAttachment
		want   string
	}{
		{
			name:   "another volume",
			attach: VolumeAttachment{InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-2", State: AttachmentAttaching},
			want:   `invalid answer to AttachVolume: answered the attachment of ebs.csi.aws.com volume "vol-2" to instance "i-1"`,
		},
		{
			name:   "an unknown state",
			attach: VolumeAttachment{InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-1", State: "busy"},
			want:   `invalid answer to AttachVolume: attachment of volume "vol-1" to instance "i-1" has unknown state "busy"`,
		},
		{
			name: "no attachment", want: "invalid answer to AttachVolume: attachment of volume \"\" has no instance ID",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := &volumeStub{info: volumesInfo(), attach: &AttachVolumeResponse{Attachment: tt.attach}}
			c := configuredOverGRPC(t, stub)
			_, err := c.AttachVolume(ctx, &AttachVolumeRequest{InstanceID: "i-1", Driver: stubDriver, VolumeHandle: "vol-1"})
			if !IsInvalidAnswer(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("AttachVolume = %v, want an invalid answer containing %q", err, tt.want)
			}
		})
	}

	stub := &volumeStub{info: volumesInfo(), describe: &DescribeVolumeAttachmentsResponse{Attachments: []VolumeAttachment{
		{InstanceID: "i-9", Driver: stubDriver, VolumeHandle: "vol-1", State: AttachmentAttaching},
	}}}
	c := configuredOverGRPC(t, stub)
	_, err := c.DescribeVolumeAttachments(ctx, &DescribeVolumeAttachmentsRequest{InstanceIDs: []string{"i-1"}})
	if want := `invalid answer to DescribeVolumeAttachments: instance "i-9" of volume "vol-1" was not asked for`; !IsInvalidAnswer(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("DescribeVolumeAttachments = %v, want an invalid answer containing %q", err, want)
	}
}

// A GetInfo answer with volumes but no drivers is an invalid answer.
func TestClientRejectsVolumesWithoutDrivers(t *testing.T) {
	info := volumesInfo()
	info.VolumeDrivers = nil
	c := overGRPC(t, &volumeStub{info: info})
	_, err := c.GetInfo(t.Context(), &GetInfoRequest{})
	if !IsInvalidAnswer(err) || !strings.Contains(err.Error(), `capability "volumes" without volume drivers`) {
		t.Errorf("GetInfo = %v, want an invalid answer naming the missing drivers", err)
	}
}
