package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const volumeDelay = 5 * time.Second

// volumeWorld is a simulator with a manual clock and the recording cells,
// and a client that sees every error at once.
type volumeWorld struct {
	t     *testing.T
	clk   *cellstest.Clock
	sim   *Server
	c     *ec2.Client
	cells *cellstest.FakeCells
}

func newVolumeWorld(t *testing.T, opts Options) *volumeWorld {
	w := &volumeWorld{t: t, clk: newClock()}
	if opts.Cells == nil {
		w.cells = newFakeCells()
		opts.Cells = w.cells
	}
	opts.Now, opts.VolumeDelay = w.clk.Now, volumeDelay
	var url string
	w.sim, url = startSim(t, opts)
	w.c = ec2Client(url, noRetries)
	return w
}

// running launches an instance in the zone's default subnet and waits for
// it to run.
func (w *volumeWorld) running(instanceType, subnet string) string {
	w.t.Helper()
	id := launch(w.t, w.c, runInput(instanceType, subnet, ""))
	eventually(w.t, "the instance to run", func() bool {
		w.clk.Advance(time.Second)
		return stateName(describe(w.t, w.c, id)) == "running"
	})
	return id
}

// volume creates an available volume in zone.
func (w *volumeWorld) volume(zone string) string {
	w.t.Helper()
	out, err := w.c.CreateVolume(w.t.Context(), &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1)})
	if err != nil {
		w.t.Fatalf("CreateVolume: %v", err)
	}
	id := aws.ToString(out.VolumeId)
	w.clk.Advance(volumeDelay)
	eventually(w.t, "the volume to be available", func() bool { return w.describe(id).State == types.VolumeStateAvailable })
	return id
}

func (w *volumeWorld) describe(id string) types.Volume {
	w.t.Helper()
	out, err := w.c.DescribeVolumes(w.t.Context(), &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
	if err != nil {
		w.t.Fatalf("DescribeVolumes %s: %v", id, err)
	}
	if len(out.Volumes) != 1 {
		w.t.Fatalf("DescribeVolumes %s answered %d volumes", id, len(out.Volumes))
	}
	return out.Volumes[0]
}

func (w *volumeWorld) attach(vol, instance, device string) error {
	_, err := w.c.AttachVolume(w.t.Context(), &ec2.AttachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(instance), Device: aws.String(device)})
	return err
}

// attachmentOf is a volume's attachment state and instance, "" when none.
func attachmentOf(v types.Volume) (state, instance, device string) {
	if len(v.Attachments) == 0 {
		return "", "", ""
	}
	a := v.Attachments[0]
	return string(a.State), aws.ToString(a.InstanceId), aws.ToString(a.Device)
}

// A volume's life through the SDK: creating, available, attaching,
// attached (in-use, shown in the instance's blockDeviceMapping), detaching,
// available, deleting, gone — each step after the volume delay.
func TestVolumeLifecycle(t *testing.T) {
	w := newVolumeWorld(t, Options{})
	ctx := t.Context()
	inst := w.running("t3.small", "subnet-00000000000000001")

	out, err := w.c.CreateVolume(ctx, &ec2.CreateVolumeInput{
		AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(10), VolumeType: types.VolumeTypeGp3, Encrypted: aws.Bool(true),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume,
			Tags: []types.Tag{{Key: aws.String("kipcell.io/cluster"), Value: aws.String("c1")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	vol := aws.ToString(out.VolumeId)
	if out.State != types.VolumeStateCreating || aws.ToInt32(out.Size) != 10 || out.VolumeType != types.VolumeTypeGp3 || !aws.ToBool(out.Encrypted) {
		t.Errorf("CreateVolume answered %s size %d type %s encrypted %v; want creating, 10, gp3, true", out.State, aws.ToInt32(out.Size), out.VolumeType, aws.ToBool(out.Encrypted))
	}
	if err := w.attach(vol, inst, "/dev/xvdba"); apiCode(err) != codeIncorrectState {
		t.Errorf("attaching a creating volume: %v, want %s", err, codeIncorrectState)
	}
	w.clk.Advance(volumeDelay)
	if v := w.describe(vol); v.State != types.VolumeStateAvailable || len(v.Tags) != 1 {
		t.Fatalf("after the delay: %s with tags %v, want available with its tag", v.State, v.Tags)
	}

	att, err := w.c.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(inst), Device: aws.String("/dev/xvdba")})
	if err != nil {
		t.Fatal(err)
	}
	if att.State != types.VolumeAttachmentStateAttaching || aws.ToString(att.Device) != "/dev/xvdba" {
		t.Errorf("AttachVolume answered %s at %s, want attaching at /dev/xvdba", att.State, aws.ToString(att.Device))
	}
	steps := []struct {
		advance            time.Duration
		volState, attState string
		blockDevices       []string // DescribeInstances: device=state
	}{
		{0, "in-use", "attaching", []string{"/dev/xvda=attached", "/dev/xvdba=attaching"}},
		{volumeDelay, "in-use", "attached", []string{"/dev/xvda=attached", "/dev/xvdba=attached"}},
	}
	check := func(i int, advance time.Duration, volState, attState string, blockDevices []string) {
		t.Helper()
		w.clk.Advance(advance)
		v := w.describe(vol)
		st, on, _ := attachmentOf(v)
		if string(v.State) != volState || st != attState || (st != "" && on != inst) {
			t.Errorf("step %d: volume %s, attachment %q to %q; want %s, %q to %s", i, v.State, st, on, volState, attState, inst)
		}
		var got []string
		for _, bd := range describe(t, w.c, inst).BlockDeviceMappings {
			got = append(got, aws.ToString(bd.DeviceName)+"="+string(bd.Ebs.Status))
		}
		if diff := cmp.Diff(blockDevices, got); diff != "" {
			t.Errorf("step %d: blockDeviceMapping (-want +got):\n%s", i, diff)
		}
	}
	for i, s := range steps {
		check(i, s.advance, s.volState, s.attState, s.blockDevices)
	}

	det, err := w.c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(inst)})
	if err != nil {
		t.Fatal(err)
	}
	if det.State != types.VolumeAttachmentStateDetaching {
		t.Errorf("DetachVolume answered %s, want detaching", det.State)
	}
	check(2, 0, "in-use", "detaching", []string{"/dev/xvda=attached", "/dev/xvdba=detaching"})
	if _, err := w.c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(vol)}); apiCode(err) != codeIncorrectState {
		t.Errorf("detaching a detaching volume: %v, want %s", err, codeIncorrectState)
	}
	check(3, volumeDelay, "available", "", []string{"/dev/xvda=attached"})

	if _, err := w.c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(vol)}); err != nil {
		t.Fatal(err)
	}
	if v := w.describe(vol); v.State != types.VolumeStateDeleting {
		t.Errorf("after DeleteVolume: %s, want deleting", v.State)
	}
	w.clk.Advance(volumeDelay)
	if _, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{vol}}); apiCode(err) != codeVolumeNotFound {
		t.Errorf("describing a deleted volume: %v, want %s", err, codeVolumeNotFound)
	}
}

// Every refusal of AttachVolume, DetachVolume and DeleteVolume, with EC2's
// code and HTTP 400; none of them changes anything.
func TestVolumeRefusals(t *testing.T) {
	small := InstanceType{Name: "t3.small", VCPUs: 2, MemoryMiB: 2048, Attachments: 4} // two data volumes
	w := newVolumeWorld(t, Options{InstanceTypes: []InstanceType{small, {Name: "m5.large", VCPUs: 2, MemoryMiB: 8192}}})
	ctx := t.Context()
	inst := w.running("t3.small", "subnet-00000000000000001")
	other := w.running("m5.large", "subnet-00000000000000001")
	attached := w.volume("us-east-1a")
	if err := w.attach(attached, inst, "/dev/xvdba"); err != nil {
		t.Fatal(err)
	}
	free := w.volume("us-east-1a")
	elsewhere := w.volume("us-east-1b")
	w.sim.SetBootDelay(time.Hour)
	pending := launch(t, w.c, runInput("m5.large", "subnet-00000000000000001", ""))

	cases := []struct {
		name     string
		call     func() error
		code     string
		contains string
	}{
		{"unknown volume", func() error { return w.attach("vol-0123456789abcdef0", inst, "/dev/xvdbb") }, codeVolumeNotFound, "vol-0123456789abcdef0"},
		{"malformed volume", func() error { return w.attach("disk-1", inst, "/dev/xvdbb") }, codeVolumeMalformed, "disk-1"},
		{"unknown instance", func() error { return w.attach(free, "i-0123456789abcdef0", "/dev/xvdbb") }, codeInstanceNotFound, "i-0123456789abcdef0"},
		{"attached elsewhere", func() error { return w.attach(attached, other, "/dev/xvdbb") }, codeVolumeInUse, attached},
		{"attached here already", func() error { return w.attach(attached, inst, "/dev/xvdbb") }, codeVolumeInUse, attached},
		{"pending instance", func() error { return w.attach(free, pending, "/dev/xvdbb") }, codeIncorrectState, pending},
		{"other zone", func() error { return w.attach(elsewhere, inst, "/dev/xvdbb") }, codeZoneMismatch, elsewhere},
		{"device in use", func() error { return w.attach(free, inst, "/dev/xvdba") }, codeInvalidParameter, "Attachment point /dev/xvdba is already in use"},
		{"root device", func() error { return w.attach(free, inst, "/dev/xvda") }, codeInvalidParameter, "Attachment point /dev/xvda is already in use"},
		{"not a device name", func() error { return w.attach(free, inst, "/dev/nvme1n1") }, codeInvalidParameter, "/dev/nvme1n1"},
		{"detach an available volume", func() error {
			_, err := w.c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(free)})
			return err
		}, codeIncorrectState, "'available'"},
		{"detach from another instance", func() error {
			_, err := w.c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(attached), InstanceId: aws.String(other)})
			return err
		}, codeAttachmentNotFound, attached},
		{"delete an attached volume", func() error {
			_, err := w.c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(attached)})
			return err
		}, codeVolumeInUse, inst},
		{"create without a size", func() error {
			_, err := w.c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a")})
			return err
		}, codeMissingParameter, "size"},
		{"create in no zone of the region", func() error {
			_, err := w.c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("eu-west-1a"), Size: aws.Int32(1)})
			return err
		}, codeInvalidParameter, "eu-west-1a"},
		{"create too small for st1", func() error {
			_, err := w.c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(100), VolumeType: types.VolumeTypeSt1})
			return err
		}, codeInvalidParameter, "125"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var re *smithyhttp.ResponseError
			if apiCode(err) != c.code || !strings.Contains(fmt.Sprint(err), c.contains) || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
				t.Errorf("got %v; want %s (HTTP 400) mentioning %q", err, c.code, c.contains)
			}
		})
	}
	// The limit: t3.small here takes two data volumes.
	if err := w.attach(free, inst, "/dev/xvdbb"); err != nil {
		t.Fatalf("second volume: %v", err)
	}
	third := w.volume("us-east-1a")
	if err := w.attach(third, inst, "/dev/xvdbc"); apiCode(err) != codeAttachmentLimit {
		t.Errorf("third volume on a type with 4 attachments: %v, want %s", err, codeAttachmentLimit)
	}
	if st, _, _ := attachmentOf(w.describe(third)); st != "" {
		t.Errorf("the refused volume is %s; want it not attached", st)
	}
	if st, on, dev := attachmentOf(w.describe(attached)); st == "" || st == "detaching" || on != inst || dev != "/dev/xvdba" {
		t.Errorf("the refusals changed the attached volume: %s to %s at %s", st, on, dev)
	}
}

// CreateVolume is idempotent on ClientToken: the same request answers the
// same volume, another request with the token IdempotentParameterMismatch.
func TestCreateVolumeClientToken(t *testing.T) {
	w := newVolumeWorld(t, Options{})
	ctx := t.Context()
	in := &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(4), ClientToken: aws.String("pvc-1")}
	first, err := w.c.CreateVolume(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.c.CreateVolume(ctx, in)
	if err != nil || aws.ToString(again.VolumeId) != aws.ToString(first.VolumeId) {
		t.Errorf("repeated CreateVolume: %v, %v; want volume %s", aws.ToString(again.VolumeId), err, aws.ToString(first.VolumeId))
	}
	in.Size = aws.Int32(5)
	if _, err := w.c.CreateVolume(ctx, in); apiCode(err) != codeIdempotentMismatch {
		t.Errorf("another size with the same token: %v, want %s", err, codeIdempotentMismatch)
	}
	if n := len(w.sim.Volumes()); n != 1 {
		t.Errorf("%d volumes, want 1", n)
	}
}

// An instance's end detaches its volumes: detaching while it shuts down,
// available once it is terminated.
func TestTerminationDetachesVolumes(t *testing.T) {
	w := newVolumeWorld(t, Options{ShutdownDelay: 10 * time.Second})
	inst := w.running("t3.small", "subnet-00000000000000001")
	vol := w.volume("us-east-1a")
	if err := w.attach(vol, inst, "/dev/xvdba"); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(volumeDelay)
	if _, err := w.c.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := attachmentOf(w.describe(vol)); st != "detaching" {
		t.Errorf("instance shutting down: attachment %q, want detaching", st)
	}
	eventually(t, "the instance to terminate and its volume to be free", func() bool {
		w.clk.Advance(time.Second)
		return w.describe(vol).State == types.VolumeStateAvailable
	})
	if st := stateName(describe(t, w.c, inst)); st != "terminated" {
		t.Errorf("volume available while the instance is %s; want terminated", st)
	}
}

// DescribeVolumes' filters and pages, as the plugin uses them.
func TestDescribeVolumesFiltersAndPages(t *testing.T) {
	w := newVolumeWorld(t, Options{})
	ctx := t.Context()
	a := w.running("t3.small", "subnet-00000000000000001")
	b := w.running("t3.small", "subnet-00000000000000001")
	var all []string
	for i := range 7 {
		v := w.volume("us-east-1a")
		all = append(all, v)
		switch i {
		case 0, 1:
			if err := w.attach(v, a, fmt.Sprintf("/dev/xvdb%c", 'a'+i)); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := w.attach(v, b, "/dev/xvdba"); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.clk.Advance(volumeDelay)
	// RunInstances made each instance's root volume, named after it.
	rootA, rootB := "vol-"+a[2:], "vol-"+b[2:]
	find := func(in *ec2.DescribeVolumesInput) []string {
		t.Helper()
		var got []string
		for p := ec2.NewDescribeVolumesPaginator(w.c, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if in.MaxResults != nil && len(page.Volumes) > int(*in.MaxResults) {
				t.Errorf("page of %d volumes, MaxResults %d", len(page.Volumes), *in.MaxResults)
			}
			for _, v := range page.Volumes {
				got = append(got, aws.ToString(v.VolumeId))
			}
		}
		return got
	}
	filter := func(name string, values ...string) []types.Filter {
		return []types.Filter{{Name: aws.String(name), Values: values}}
	}
	cases := []struct {
		name string
		in   *ec2.DescribeVolumesInput
		want []string
	}{
		{"all, in pages of 5", &ec2.DescribeVolumesInput{MaxResults: aws.Int32(5)}, append([]string{rootA, rootB}, all...)},
		{"attached to a", &ec2.DescribeVolumesInput{Filters: filter("attachment.instance-id", a)}, []string{rootA, all[0], all[1]}},
		{"attached to a or b", &ec2.DescribeVolumesInput{Filters: filter("attachment.instance-id", a, b)}, append([]string{rootA, rootB}, all[:3]...)},
		{"attached", &ec2.DescribeVolumesInput{Filters: filter("attachment.status", "attached")}, append([]string{rootA, rootB}, all[:3]...)},
		{"attached by AttachVolume", &ec2.DescribeVolumesInput{Filters: filter("attachment.delete-on-termination", "false")}, all[:3]},
		{"root volumes", &ec2.DescribeVolumesInput{Filters: filter("attachment.device", "/dev/xvda")}, []string{rootA, rootB}},
		{"available", &ec2.DescribeVolumesInput{Filters: filter("status", "available")}, all[3:]},
		{"in another zone", &ec2.DescribeVolumesInput{Filters: filter("availability-zone", "us-east-1b")}, nil},
		{"by ID", &ec2.DescribeVolumesInput{VolumeIds: []string{all[4], all[1]}}, []string{all[1], all[4]}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, find(c.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: filter("attachment.nonsense", "x")}); apiCode(err) != codeInvalidParameter {
		t.Errorf("unknown filter: %v, want %s", err, codeInvalidParameter)
	}
	if _, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: all[:1], MaxResults: aws.Int32(5)}); apiCode(err) != codeInvalidCombination {
		t.Errorf("VolumeId with MaxResults: %v, want %s", err, codeInvalidCombination)
	}
}

// diskCells is a CellStarter that also gives cells disks, recording what
// the simulator asks: DetachDisk fails while busy says a disk is in use
// (mounted in the cell), and every call waits for gate when it is set.
type diskCells struct {
	*cellstest.FakeCells
	mu    sync.Mutex
	calls []string
	busy  map[string]bool
	disks map[string]int64
	gate  chan struct{}
}

func newDiskCells() *diskCells {
	return &diskCells{FakeCells: newFakeCells(), busy: map[string]bool{}, disks: map[string]int64{}}
}

func (d *diskCells) record(call string) {
	d.mu.Lock()
	gate := d.gate
	d.mu.Unlock()
	if gate != nil {
		<-gate
	}
	d.mu.Lock()
	d.calls = append(d.calls, call)
	d.mu.Unlock()
}

func (d *diskCells) CreateDisk(_ context.Context, id string, size int64) error {
	d.record(fmt.Sprintf("CreateDisk %s %d", id, size))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disks[id] = size
	return nil
}

func (d *diskCells) DeleteDisk(_ context.Context, id string) error {
	d.record("DeleteDisk " + id)
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.disks, id)
	return nil
}

func (d *diskCells) AttachDisk(_ context.Context, instance, id, path string, readOnly bool) error {
	d.record(fmt.Sprintf("AttachDisk %s %s %s %v", instance, id, path, readOnly))
	return nil
}

func (d *diskCells) DetachDisk(_ context.Context, instance, id string) error {
	d.record(fmt.Sprintf("DetachDisk %s %s", instance, id))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[id] {
		return fmt.Errorf("disk %s is mounted in the cell of %s", id, instance)
	}
	return nil
}

func (d *diskCells) setGate(g chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate = g
}

func (d *diskCells) setBusy(id string, busy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.busy[id] = busy
}

func (d *diskCells) recorded() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *diskCells) count(prefix string) int {
	n := 0
	for _, c := range d.recorded() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// With a DiskStarter each volume is a disk: created before the volume is
// available, given to the instance's cell at the NVMe by-id path before it
// is attached, taken back (asked again while the cell holds it) before it
// is detached, and deleted before it is gone.
func TestVolumesAreDisksOfTheCells(t *testing.T) {
	disks := newDiskCells()
	w := newVolumeWorld(t, Options{Cells: disks})
	ctx := t.Context()
	inst := w.running("t3.small", "subnet-00000000000000001")

	gate := make(chan struct{})
	disks.setGate(gate)
	out, err := w.c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	vol := aws.ToString(out.VolumeId)
	w.clk.Advance(volumeDelay)
	if st := w.describe(vol).State; st != types.VolumeStateCreating {
		t.Errorf("delay over, disk not made: %s, want creating", st)
	}
	close(gate)
	disks.setGate(nil)
	eventually(t, "the volume to be available", func() bool { return w.describe(vol).State == types.VolumeStateAvailable })

	if err := w.attach(vol, inst, "/dev/xvdba"); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(volumeDelay)
	eventually(t, "the volume to be attached", func() bool { st, _, _ := attachmentOf(w.describe(vol)); return st == "attached" })

	disks.setBusy(vol, true)
	if _, err := w.c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(vol)}); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(volumeDelay)
	eventually(t, "DetachDisk to be asked twice", func() bool { return disks.count("DetachDisk") >= 2 })
	if st, _, _ := attachmentOf(w.describe(vol)); st != "detaching" {
		t.Errorf("the cell holds the disk: attachment %q, want detaching", st)
	}
	disks.setBusy(vol, false)
	eventually(t, "the volume to be detached", func() bool { return w.describe(vol).State == types.VolumeStateAvailable })

	if _, err := w.c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(vol)}); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(volumeDelay)
	eventually(t, "the volume to be gone", func() bool {
		_, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{vol}})
		return apiCode(err) == codeVolumeNotFound
	})

	var got []string
	for _, c := range disks.recorded() {
		if !strings.HasPrefix(c, "DetachDisk") || !slices.Contains(got, c) {
			got = append(got, c)
		}
	}
	want := []string{
		fmt.Sprintf("CreateDisk %s %d", vol, 2<<30),
		fmt.Sprintf("AttachDisk %s %s /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_%s false", inst, vol, strings.ReplaceAll(vol, "-", "")),
		fmt.Sprintf("DetachDisk %s %s", inst, vol),
		"DeleteDisk " + vol,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DiskStarter calls, repeated DetachDisk folded (-want +got):\n%s", diff)
	}
}

// RunInstances makes the instance's root volume: attaching while the
// instance is pending, then attached at /dev/xvda with DeleteOnTermination,
// sized and tagged as the launch asked; it cannot be detached or deleted,
// counts against the attachment limit, and is deleted with the instance.
func TestRootVolume(t *testing.T) {
	w := newVolumeWorld(t, Options{ShutdownDelay: time.Second})
	ctx := t.Context()
	in := runInput("t3.small", "subnet-00000000000000001", "")
	in.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsBlockDevice{VolumeSize: aws.Int32(30), VolumeType: types.VolumeTypeGp3}}}
	in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("kipcell.io/cluster"), Value: aws.String("c1")}}}}
	w.cells.Gate = make(chan struct{})
	inst := launch(t, w.c, in)
	root := "vol-" + inst[2:]
	if st, on, dev := attachmentOf(w.describe(root)); st != "attaching" || on != inst || dev != "/dev/xvda" {
		t.Errorf("pending instance: root %s to %s at %s, want attaching at /dev/xvda", st, on, dev)
	}
	close(w.cells.Gate)
	eventually(t, "the instance to run", func() bool {
		w.clk.Advance(time.Second)
		return stateName(describe(t, w.c, inst)) == "running"
	})
	v := w.describe(root)
	if st, _, _ := attachmentOf(v); st != "attached" || !aws.ToBool(v.Attachments[0].DeleteOnTermination) || aws.ToInt32(v.Size) != 30 ||
		v.VolumeType != types.VolumeTypeGp3 || len(v.Tags) != 1 || v.State != types.VolumeStateInUse {
		t.Errorf("running instance's root volume: %+v", v)
	}
	if _, err := w.c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(root)}); apiCode(err) != codeIncorrectState {
		t.Errorf("detaching the root volume: %v, want %s", err, codeIncorrectState)
	}
	if _, err := w.c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(root)}); apiCode(err) != codeVolumeInUse {
		t.Errorf("deleting the root volume: %v, want %s", err, codeVolumeInUse)
	}
	if _, err := w.c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the root volume to be deleted", func() bool {
		w.clk.Advance(time.Second)
		_, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{root}})
		return apiCode(err) == codeVolumeNotFound
	})
}

// With eventual consistency, a new volume is NotFound to the other calls
// for a while; a repeated CreateVolume still answers it.
func TestVolumeEventualConsistency(t *testing.T) {
	w := newVolumeWorld(t, Options{})
	ctx := t.Context()
	inst := w.running("t3.small", "subnet-00000000000000001")
	w.sim.SetEventualConsistency(10 * time.Second)
	in := &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(1), ClientToken: aws.String("pvc-ec")}
	out, err := w.c.CreateVolume(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	vol := aws.ToString(out.VolumeId)
	w.clk.Advance(volumeDelay)
	if _, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{vol}}); apiCode(err) != codeVolumeNotFound {
		t.Errorf("describing the new volume: %v, want %s", err, codeVolumeNotFound)
	}
	if err := w.attach(vol, inst, "/dev/xvdba"); apiCode(err) != codeVolumeNotFound {
		t.Errorf("attaching the new volume: %v, want %s", err, codeVolumeNotFound)
	}
	available := []types.Filter{{Name: aws.String("status"), Values: []string{"available", "creating"}}}
	if all, err := w.c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: available}); err != nil || len(all.Volumes) != 0 {
		t.Errorf("listing: %d volumes, %v; want none yet", len(all.Volumes), err)
	}
	if again, err := w.c.CreateVolume(ctx, in); err != nil || aws.ToString(again.VolumeId) != vol {
		t.Errorf("repeated CreateVolume: %v, %v; want %s", aws.ToString(again.VolumeId), err, vol)
	}
	w.clk.Advance(5 * time.Second)
	if v := w.describe(vol); v.State != types.VolumeStateAvailable {
		t.Errorf("after the delay: %s, want available", v.State)
	}
}

// Close deletes the disks of the volumes a test left.
func TestCloseDeletesTheDisksLeft(t *testing.T) {
	disks := newDiskCells()
	w := newVolumeWorld(t, Options{Cells: disks})
	vol := w.volume("us-east-1a")
	if err := w.sim.Close(); err != nil {
		t.Fatal(err)
	}
	disks.mu.Lock()
	defer disks.mu.Unlock()
	if len(disks.disks) != 0 || !slices.Contains(disks.calls, "DeleteDisk "+vol) {
		t.Errorf("after Close: disks %v, calls %v; want volume %s's disk deleted", disks.disks, disks.calls, vol)
	}
}
