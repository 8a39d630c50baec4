package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// currentAttachment takes a disk's record and the kernel's loop device
// together: the kernel's device wins, a recorded attachment whose device
// is gone is none, and an attach without a device yet is attaching only
// while some call holds the disk's lock.
func TestCurrentAttachment(t *testing.T) {
	rec := func(state pluginapi.AttachmentState, device string) *volumeAttachment {
		return &volumeAttachment{InstanceID: "local-a", CellID: "cell-a", State: state, Device: device, ReadOnly: true}
	}
	tests := []struct {
		name       string
		a          *volumeAttachment
		loop       string
		inProgress bool
		want       *liveAttachment
	}{
		{"nothing", nil, "", false, nil},
		{"a device nobody recorded", nil, "/dev/loop3", false,
			&liveAttachment{State: pluginapi.AttachmentAttached, Device: "/dev/loop3"}},
		{"attached", rec(pluginapi.AttachmentAttached, "/dev/loop3"), "/dev/loop3", false,
			&liveAttachment{InstanceID: "local-a", State: pluginapi.AttachmentAttached, Device: "/dev/loop3", ReadOnly: true}},
		{"attached, the kernel's device wins", rec(pluginapi.AttachmentAttached, "/dev/loop3"), "/dev/loop5", false,
			&liveAttachment{InstanceID: "local-a", State: pluginapi.AttachmentAttached, Device: "/dev/loop5", ReadOnly: true}},
		{"attach interrupted after binding", rec(pluginapi.AttachmentAttaching, ""), "/dev/loop3", false,
			&liveAttachment{InstanceID: "local-a", State: pluginapi.AttachmentAttached, Device: "/dev/loop3", ReadOnly: true}},
		{"attach under way", rec(pluginapi.AttachmentAttaching, ""), "", true,
			&liveAttachment{InstanceID: "local-a", State: pluginapi.AttachmentAttaching, ReadOnly: true}},
		{"attach interrupted before binding", rec(pluginapi.AttachmentAttaching, ""), "", false, nil},
		{"device gone behind the plugin's back", rec(pluginapi.AttachmentAttached, "/dev/loop3"), "", false, nil},
		{"device gone, lock held", rec(pluginapi.AttachmentAttached, "/dev/loop3"), "", true, nil},
		{"detaching, device still open", rec(pluginapi.AttachmentDetaching, "/dev/loop3"), "/dev/loop3", false,
			&liveAttachment{InstanceID: "local-a", State: pluginapi.AttachmentDetaching, Device: "/dev/loop3", ReadOnly: true}},
		{"detached", rec(pluginapi.AttachmentDetaching, "/dev/loop3"), "", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := currentAttachment(tt.a, tt.loop, tt.inProgress)
			switch {
			case got == nil && tt.want == nil:
			case got == nil || tt.want == nil || *got != *tt.want:
				t.Errorf("currentAttachment = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCreateVolumeRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, stateDir, handle, zone string
		size                         int64
		want                         string
	}{
		{"relative state dir", "var/kip", "d1", "local", 1 << 20, "not an absolute path"},
		{"empty handle", dir, "", "local", 1 << 20, "handle"},
		{"handle with a slash", dir, "a/b", "local", 1 << 20, "handle"},
		{"handle with dots only", dir, "..", "local", 1 << 20, "handle"},
		{"handle too long", dir, strings.Repeat("a", 129), "local", 1 << 20, "handle"},
		{"no zone", dir, "d1", "", 1 << 20, "no zone"},
		{"no size", dir, "d1", "local", 0, "size"},
		{"size not of sectors", dir, "d1", "local", 1000, "size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CreateVolume(t.Context(), tt.stateDir, tt.handle, tt.zone, tt.size)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CreateVolume(%q, %q, %q, %d) = %v, want an error saying %q", tt.stateDir, tt.handle, tt.zone, tt.size, err, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(volumesDir(dir)); len(entries) > 0 {
		t.Errorf("refused creations left %d files", len(entries))
	}
}

// A disk is a sparse file of its size with its record beside it;
// creating it again is idempotent, with another size or zone an error;
// deleting it removes its files, and again is NotFound.
func TestCreateAndDeleteVolume(t *testing.T) {
	dir := t.TempDir()
	before := time.Now().UTC()
	if err := CreateVolume(t.Context(), dir, "pvc-1", "local", 64<<20); err != nil {
		t.Fatal(err)
	}
	img := volumeImagePath(dir, "pvc-1")
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 64<<20 {
		t.Errorf("image of %d bytes, want %d", fi.Size(), 64<<20)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Blocks*512 >= fi.Size() {
		t.Errorf("image takes %d bytes on disk: not sparse", st.Blocks*512)
	}
	v, err := readVolume(dir, "pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Handle != "pvc-1" || v.Zone != "local" || v.SizeBytes != 64<<20 || v.CreatedAt.Before(before) || v.Attachment != nil {
		t.Errorf("record %+v", v)
	}

	// Data survives an idempotent create.
	if err := os.WriteFile(img, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := CreateVolume(t.Context(), dir, "pvc-1", "local", 64<<20); err != nil {
		t.Errorf("creating the same disk again: %v", err)
	}
	if data, _ := os.ReadFile(img); string(data[:4]) != "data" {
		t.Errorf("creating the disk again lost its data")
	}
	for _, c := range []struct {
		zone string
		size int64
	}{{"other", 64 << 20}, {"local", 32 << 20}} {
		if err := CreateVolume(t.Context(), dir, "pvc-1", c.zone, c.size); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("creating disk pvc-1 again in zone %s with %d bytes: %v, want an error saying it exists", c.zone, c.size, err)
		}
	}

	if err := DeleteVolume(t.Context(), dir, "pvc-1"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(volumesDir(dir)); len(entries) > 0 {
		t.Errorf("a deleted disk left %d files", len(entries))
	}
	for _, handle := range []string{"pvc-1", "never", "../x"} {
		if err := DeleteVolume(t.Context(), dir, handle); !pluginapi.IsNotFound(err) {
			t.Errorf("deleting disk %s: %v, want NotFound", handle, err)
		}
	}
}

// A record that says attached while no loop device backs the disk (the
// machine restarted) does not keep the disk from being deleted.
func TestDeleteVolumeIgnoresAStaleAttachment(t *testing.T) {
	dir := t.TempDir()
	if err := CreateVolume(t.Context(), dir, "pvc-2", "local", 1<<20); err != nil {
		t.Fatal(err)
	}
	v, err := readVolume(dir, "pvc-2")
	if err != nil {
		t.Fatal(err)
	}
	v.Attachment = &volumeAttachment{InstanceID: "local-gone", CellID: "gone", State: pluginapi.AttachmentAttached, Device: "/dev/loop99999"}
	if err := writeVolume(dir, v); err != nil {
		t.Fatal(err)
	}
	if err := DeleteVolume(t.Context(), dir, "pvc-2"); err != nil {
		t.Fatalf("deleting a disk whose recorded device is gone: %v", err)
	}
	if _, err := readVolume(dir, "pvc-2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the disk is still there: %v", err)
	}
}

// readVolumes reads the records and nothing else of the volumes
// directory: images, locks, temporary files.
func TestReadVolumes(t *testing.T) {
	dir := t.TempDir()
	for _, h := range []string{"b", "a"} {
		if err := CreateVolume(t.Context(), dir, h, "local", 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(volumesDir(dir), "a.tmp123"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	vols, err := readVolumes(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vols {
		got = append(got, v.Handle)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("readVolumes = %q, want a and b", got)
	}
	if vols, err := readVolumes(filepath.Join(dir, "none")); err != nil || len(vols) != 0 {
		t.Errorf("readVolumes of a state directory without disks = %v, %v", vols, err)
	}
}
