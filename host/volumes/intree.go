package volumes

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The CSI drivers the in-tree disks migrated to, and their handles, as
// k8s.io/csi-translation-lib (v0.36) translates them: kip does not link it
// (it would raise the root module's Kubernetes libraries), so its three
// disk translations are restated here, each citing the function it
// follows.
const (
	ebsDriver   = "ebs.csi.aws.com"       // plugins.AWSEBSDriverName
	gcePDDriver = "pd.csi.storage.gke.io" // plugins.GCEPDDriverName
	azureDriver = "disk.csi.azure.com"    // plugins.AzureDiskDriverName

	// gceUnspecified stands for an unknown project or zone in a PD handle
	// (plugins.UnspecifiedValue); the PD CSI driver looks the disk up.
	gceUnspecified = "UNSPECIFIED"
	// multiZoneDelimiter separates the zones of a regional disk in a
	// PV's zone label (plugins.labelMultiZoneDelimiter).
	multiZoneDelimiter = "__"
)

// ebsVolumeID is the EBS volume ID after an aws:// URL's zone
// (plugins.awsVolumeRegMatch).
var ebsVolumeID = regexp.MustCompile("^vol-[^/]*$")

// source is a disk's CSI source, translated or read from the PV.
type source struct {
	driver, handle, fsType string
	readOnly               bool
	// zone and zoneFrom: the zone an EBS aws://<zone>/<id> volume ID
	// names, and that ID.
	zone, zoneFrom string
	// gce: access modes are read as the PD translation rewrites them.
	gce bool
	// inlineModes are the access modes the translation gives an inline
	// volume's PV.
	inlineModes []corev1.PersistentVolumeAccessMode
}

// rwo reports whether modes, as the translated PV has them, include
// ReadWriteOnce or ReadWriteOncePod (the CSI plugin's hasReadWriteOnce).
func (s source) rwo(modes []corev1.PersistentVolumeAccessMode) bool {
	if modes == nil {
		return false
	}
	if s.gce {
		modes = gceAccessModes(modes)
	}
	for _, m := range modes {
		if m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod {
			return true
		}
	}
	return false
}

// gceAccessModes is the PD translation's backwardCompatibleAccessModes:
// in-tree PD took ReadWriteMany and ReadOnlyMany+ReadWriteOnce as
// ReadWriteOnce, and anything without ReadOnlyMany alone as ReadWriteOnce.
func gceAccessModes(modes []corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		if m == corev1.ReadWriteMany {
			m = corev1.ReadWriteOnce
		}
		has[m] = true
	}
	if has[corev1.ReadOnlyMany] && !has[corev1.ReadWriteOnce] {
		return []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

// translatePV answers a PV's CSI source: its own, or its in-tree disk's
// translation (TranslateInTreePVToCSI of each plugin).
func translatePV(pv *corev1.PersistentVolume) (source, error) {
	s := pv.Spec.PersistentVolumeSource
	switch {
	case s.CSI != nil:
		return source{driver: s.CSI.Driver, handle: s.CSI.VolumeHandle, fsType: s.CSI.FSType, readOnly: s.CSI.ReadOnly}, nil
	case s.AWSElasticBlockStore != nil:
		return ebs(s.AWSElasticBlockStore)
	case s.GCEPersistentDisk != nil:
		pd := s.GCEPersistentDisk
		if pd.Partition != 0 {
			return source{}, fmt.Errorf("gcePersistentDisk partition %d is not supported", pd.Partition)
		}
		// The zone comes from the PV's labels, beta first; a regional
		// disk's two zones make a regional handle.
		label := pv.Labels[corev1.LabelFailureDomainBetaZone]
		if label == "" {
			label = pv.Labels[corev1.LabelTopologyZone]
		}
		handle := fmt.Sprintf("projects/%s/zones/%s/disks/%s", gceUnspecified, gceUnspecified, pd.PDName)
		if zones := strings.Split(label, multiZoneDelimiter); len(zones) > 1 {
			region, err := gceRegion(zones)
			if err != nil {
				return source{}, err
			}
			handle = fmt.Sprintf("projects/%s/regions/%s/disks/%s", gceUnspecified, region, pd.PDName)
		} else if label != "" {
			handle = fmt.Sprintf("projects/%s/zones/%s/disks/%s", gceUnspecified, label, pd.PDName)
		}
		return source{driver: gcePDDriver, handle: handle, fsType: pd.FSType, readOnly: pd.ReadOnly, gce: true}, nil
	case s.AzureDisk != nil:
		return azure(s.AzureDisk)
	}
	return source{}, fmt.Errorf("a %s volume is not supported on a cell: only CSI volumes, awsElasticBlockStore, gcePersistentDisk, azureDisk and nfs are", pvKind(s))
}

// translateInline answers an inline in-tree disk's CSI source
// (TranslateInTreeInlineVolumeToCSI of each plugin) and, on error, the
// field at fault below the volume.
func translateInline(v *corev1.Volume) (source, string, error) {
	switch {
	case v.AWSElasticBlockStore != nil:
		s, err := ebs(v.AWSElasticBlockStore)
		s.inlineModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		return s, ".awsElasticBlockStore", err
	case v.GCEPersistentDisk != nil:
		pd := v.GCEPersistentDisk
		if pd.Partition != 0 {
			return source{}, ".gcePersistentDisk.partition", fmt.Errorf("gcePersistentDisk partition %d is not supported", pd.Partition)
		}
		mode := corev1.ReadWriteOnce
		if pd.ReadOnly {
			mode = corev1.ReadOnlyMany
		}
		return source{
			driver:      gcePDDriver,
			handle:      fmt.Sprintf("projects/%s/zones/%s/disks/%s", gceUnspecified, gceUnspecified, pd.PDName),
			fsType:      pd.FSType,
			readOnly:    pd.ReadOnly,
			inlineModes: []corev1.PersistentVolumeAccessMode{mode},
		}, "", nil
	default:
		s, err := azure(v.AzureDisk)
		s.inlineModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		return s, ".azureDisk", err
	}
}

// ebs translates an EBS source: the handle is the volume ID without an
// aws://<zone>/ prefix (KubernetesVolumeIDToEBSVolumeID), whose zone is
// kept as a last resort for the disk's zone.
func ebs(e *corev1.AWSElasticBlockStoreVolumeSource) (source, error) {
	if e.Partition != 0 {
		return source{}, fmt.Errorf("awsElasticBlockStore partition %d is not supported", e.Partition)
	}
	s := source{driver: ebsDriver, handle: e.VolumeID, fsType: e.FSType, readOnly: e.ReadOnly}
	if !strings.HasPrefix(e.VolumeID, "aws://") {
		return s, nil
	}
	u, err := url.Parse(e.VolumeID)
	if err != nil {
		return source{}, fmt.Errorf("invalid EBS volume ID %s: %w", e.VolumeID, err)
	}
	id := strings.Trim(u.Path, "/")
	if !ebsVolumeID.MatchString(id) {
		return source{}, fmt.Errorf("invalid format for AWS volume (%s)", e.VolumeID)
	}
	s.handle, s.zone, s.zoneFrom = id, u.Host, e.VolumeID
	return s, nil
}

// azure translates an Azure disk: the handle is the disk's URI; only
// managed disks migrated (TranslateInTreePVToCSI refuses another kind).
func azure(a *corev1.AzureDiskVolumeSource) (source, error) {
	if a.Kind != nil && !strings.EqualFold(string(*a.Kind), string(corev1.AzureManagedDisk)) {
		return source{}, fmt.Errorf("azureDisk kind %s is not supported: only Managed disks are", *a.Kind)
	}
	s := source{driver: azureDriver, handle: a.DataDiskURI}
	if a.FSType != nil {
		s.fsType = *a.FSType
	}
	if a.ReadOnly != nil {
		s.readOnly = *a.ReadOnly
	}
	return s, nil
}

// gceRegion is the one region of a regional disk's zones
// (gceGetRegionFromZones: {locale}-{region}-{zone}).
func gceRegion(zones []string) (string, error) {
	region := ""
	for _, z := range zones {
		parts := strings.Split(z, "-")
		if len(parts) != 3 {
			return "", fmt.Errorf("zone in unexpected format, expected: {locale}-{region}-{zone}, got: %v", z)
		}
		r := parts[0] + "-" + parts[1]
		if region != "" && r != region {
			return "", fmt.Errorf("multiple regions in zones %v", zones)
		}
		region = r
	}
	return region, nil
}

// pvKind names a PV source a cell cannot have, for the message.
func pvKind(s corev1.PersistentVolumeSource) string {
	switch {
	case s.Local != nil:
		return "local"
	case s.HostPath != nil:
		return "hostPath"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	case s.CephFS != nil:
		return "cephfs"
	case s.RBD != nil:
		return "rbd"
	case s.AzureFile != nil:
		return "azureFile"
	case s.Cinder != nil:
		return "cinder"
	case s.VsphereVolume != nil:
		return "vsphereVolume"
	}
	return "non-CSI"
}
