package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kipcell/kip/plugins/local"
)

// The demo's persistent volumes (issue 31): the StorageClass kip-local,
// kip-local-provisioner making its disks in the local plugin's state
// directory, and the StatefulSet notes (deploy/examples/statefulset.yaml),
// which kip-demo applies with the workload when kip reports volume
// support, so that its pods and their disks start while hack/demo.sh shows
// the workload; hack/demo.sh shows the StatefulSet's steps when it is
// there.

// localZone is the local plugin's zone as the demo runs it (the plugin's
// default, plugins/local's config.go): the provisioner's zone, and the Kip
// node's (node.zone, KIP_NODE_ZONE), so that kip writes the node's zone
// label and its CSINode for the plugin's driver where it knows node.zone.
const localZone = "local"

// notesLabel selects the StatefulSet example's objects and its claims.
const notesLabel = "app=notes"

// volumeSupport says whether kip attaches the local plugin's disks, as
// kip says it, as a kubelet says it of a CSI driver: its node's CSINode
// lists the driver. kip writes it when it starts; it waits up to timeout
// for it.
func volumeSupport(ctx context.Context, client kubernetes.Interface, nodeName string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if n, err := client.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			for _, d := range n.Spec.Drivers {
				if d.Name == local.VolumeDriver {
					return true
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// provisioner is a running kip-local-provisioner.
type provisioner struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProvisioner starts kip-local-provisioner from bin with the local
// plugin's stateDir and the cluster-admin kubeconfig, its output to
// logPath.
func startProvisioner(bin, stateDir, kubeconfig, logPath string) (*provisioner, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the provisioner's log: %w", err)
	}
	cmd := exec.Command(filepath.Join(bin, "kip-local-provisioner"), provisionerArgs(stateDir, kubeconfig)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, ended with kip-demo (as kip is, framework's
	// process.go).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kip-local-provisioner: %w", err)
	}
	p := &provisioner{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(p.done) }()
	return p, nil
}

// provisionerArgs are kip-local-provisioner's arguments.
func provisionerArgs(stateDir, kubeconfig string) []string {
	return []string{"--state-dir", stateDir, "--zone", localZone, "--kubeconfig", kubeconfig}
}

// Stop ends the provisioner: SIGTERM, then SIGKILL after 10 s.
func (p *provisioner) Stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// deleteNotes deletes the StatefulSet example, waits for its pods to end
// (kip detaches their disks), deletes its claims and waits, up to timeout
// in all, until the provisioner deleted their volumes and disks, so that
// demo-down leaves no disk behind. Without the example it does nothing.
func deleteNotes(ctx context.Context, client kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	claims, err := client.CoreV1().PersistentVolumeClaims(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: notesLabel})
	if err != nil {
		return fmt.Errorf("listing the notes claims: %w", err)
	}
	if err := client.AppsV1().StatefulSets(corev1.NamespaceDefault).Delete(ctx, "notes", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting StatefulSet notes: %w", err)
	}
	if err := client.CoreV1().Services(corev1.NamespaceDefault).Delete(ctx, "notes", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Service notes: %w", err)
	}
	if err := waitGone(ctx, "the notes pods", func() (int, error) {
		pods, err := client.CoreV1().Pods(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: notesLabel})
		if err != nil {
			return 0, err
		}
		return len(pods.Items), nil
	}); err != nil {
		return err
	}
	var volumes []string
	for _, c := range claims.Items {
		if c.Spec.VolumeName != "" {
			volumes = append(volumes, c.Spec.VolumeName)
		}
		// The StatefulSet's retention policy deletes them too; at once is
		// sooner than the garbage collector.
		if err := client.CoreV1().PersistentVolumeClaims(c.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting claim %s: %w", c.Name, err)
		}
	}
	return waitGone(ctx, "the notes volumes", func() (int, error) {
		n := 0
		for _, v := range volumes {
			switch _, err := client.CoreV1().PersistentVolumes().Get(ctx, v, metav1.GetOptions{}); {
			case err == nil:
				n++
			case !apierrors.IsNotFound(err):
				return 0, err
			}
		}
		return n, nil
	})
}

// waitGone polls count until it is 0 or ctx ends.
func waitGone(ctx context.Context, what string, count func() (int, error)) error {
	for {
		n, err := count()
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for %s to go: %w (%w)", what, ctx.Err(), err)
			}
			return fmt.Errorf("waiting for %s to go: %d left: %w", what, n, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
