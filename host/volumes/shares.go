package volumes

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Share is one pod volume that is an NFS share: a claim bound to a PV of
// spec.nfs or of an NFS CSI driver, which the cell's agent mounts itself
// (nothing is attached). ResolveAll answers them.
type Share struct {
	// Volume is the pod's volume name; Claim and PV its claim and volume.
	Volume, Claim, PV string
	// Server is the NFS server, a host name or an address.
	Server string
	// Path is the exported path.
	Path string
	// ReadOnly is the claim volume's readOnly or the PV source's.
	ReadOnly bool
	// MountOptions are the PV's spec.mountOptions, and what the driver's
	// node plugin would add (vers=4.1 for Azure Files).
	MountOptions []string
}

// NFS CSI drivers whose volumes a cell mounts with its own NFS client,
// as their node plugins would.
const (
	// DriverNFS is csi-driver-nfs (kubernetes-csi).
	DriverNFS = "nfs.csi.k8s.io"
	// DriverFilestore is Google Cloud Filestore's.
	DriverFilestore = "filestore.csi.storage.gke.io"
	// DriverAzureFile is Azure Files', NFS when its protocol attribute
	// says so (SMB otherwise).
	DriverAzureFile = "file.csi.azure.com"
	// DriverEFS is Amazon EFS's, which mounts through efs-utils.
	DriverEFS = "efs.csi.aws.com"
)

// isShare reports whether pv is an NFS share rather than a disk.
func isShare(pv *corev1.PersistentVolume) bool {
	if pv.Spec.NFS != nil {
		return true
	}
	csi := pv.Spec.CSI
	return csi != nil && slices.Contains([]string{DriverNFS, DriverFilestore, DriverAzureFile, DriverEFS}, csi.Driver)
}

// share keeps the NFS share of the claim name bound to pv.
func (r resolver) share(pv *corev1.PersistentVolume, claim string, readOnly bool, field string) error {
	sh, err := translateShare(pv)
	if err != nil {
		return r.fail(field, UnsupportedVolume, "PersistentVolume %q: %v", pv.Name, err)
	}
	sh.Volume, sh.Claim, sh.PV = r.vol.Name, claim, pv.Name
	sh.ReadOnly = sh.ReadOnly || readOnly
	*r.shares = append(*r.shares, sh)
	return nil
}

// translateShare reads the server and path of an NFS PV as its driver's
// node plugin does.
func translateShare(pv *corev1.PersistentVolume) (Share, error) {
	opts := slices.Clone(pv.Spec.MountOptions)
	if n := pv.Spec.NFS; n != nil {
		return Share{Server: n.Server, Path: n.Path, ReadOnly: n.ReadOnly, MountOptions: opts}, nil
	}
	csi := pv.Spec.CSI
	attr := func(keys ...string) string {
		// The drivers read their attributes without case
		// (csi-driver-nfs, azurefile: strings.ToLower of each key).
		for k, v := range csi.VolumeAttributes {
			for _, key := range keys {
				if strings.EqualFold(k, key) {
					return v
				}
			}
		}
		return ""
	}
	var sh Share
	switch csi.Driver {
	case DriverNFS:
		// csi-driver-nfs's NodePublishVolume: source server:share/subdir.
		sh.Server, sh.Path = attr("server"), attr("share")
		if sub := attr("subdir"); sub != "" {
			sh.Path = path.Join(sh.Path, sub)
		}
	case DriverFilestore:
		// The Filestore driver's volume attributes: the instance's ip and
		// its file share's name (volume), exported as /<name>.
		sh.Server, sh.Path = attr("ip"), "/"+attr("volume")
		if attr("volume") == "" {
			sh.Path = ""
		}
	case DriverAzureFile:
		if p := attr("protocol"); !strings.EqualFold(p, "nfs") {
			return Share{}, fmt.Errorf("an Azure Files share over SMB (protocol %q) is not supported on a cell: only NFS shares (protocol nfs) are", p)
		}
		// azurefile's handle: {resource group}#{account}#{share}#...
		fields := strings.Split(csi.VolumeHandle, "#")
		account, share := attr("storageAccount"), attr("shareName")
		if account == "" && len(fields) > 1 {
			account = fields[1]
		}
		if share == "" && len(fields) > 2 {
			share = fields[2]
		}
		if account == "" || share == "" {
			return Share{}, fmt.Errorf("the Azure Files volume names no storage account and share (volumeAttributes storageAccount, shareName, or the handle rg#account#share)")
		}
		sh.Server = attr("server")
		if sh.Server == "" {
			sh.Server = account + ".file.core.windows.net"
		}
		// Azure Files serves NFS 4.1 only, with AUTH_SYS, at
		// /<account>/<share> (what the driver mounts).
		sh.Path = "/" + account + "/" + share
		if !slices.ContainsFunc(opts, isVersionOption) {
			opts = append(opts, "vers=4.1")
		}
	case DriverEFS:
		return Share{}, fmt.Errorf("an EFS volume is mounted through efs-utils (TLS, IAM authorization, access points), which a cell does not have: "+
			"use a PersistentVolume of spec.nfs with the file system's mount target (%s.efs.<region>.amazonaws.com) and mountOptions [nfsvers=4.1]",
			strings.SplitN(csi.VolumeHandle, ":", 2)[0])
	}
	if sh.Server == "" || sh.Path == "" {
		return Share{}, fmt.Errorf("the %s volume names no server or share (volumeAttributes)", csi.Driver)
	}
	sh.ReadOnly, sh.MountOptions = csi.ReadOnly, opts
	return sh, nil
}

// isVersionOption reports whether a mount option names the NFS version.
func isVersionOption(o string) bool {
	k, _, _ := strings.Cut(o, "=")
	return k == "vers" || k == "nfsvers"
}
