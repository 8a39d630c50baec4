// Command kip-local-provisioner provisions the local plugin's disks for the
// claims of StorageClasses whose provisioner is local.csi.kipcell.io
// (deploy/examples/kip-local-storage.yaml), as the external-provisioner does
// for a cloud's CSI driver: see package localprov. It runs beside kip on
// the machine of the local plugin's cells, with the plugin's stateDir and
// zone, until SIGTERM or SIGINT:
//
//	kip-local-provisioner --state-dir DIR [--zone local] [--kubeconfig FILE]
//
// Its identity needs what the external-provisioner's RBAC grants: claims
// (get, list, watch, update), volumes (get, list, watch, create, update,
// delete), StorageClasses, Nodes and CSINodes (get), and events (create,
// patch).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kipcell/kip/host/kubeconfig"
	"github.com/kipcell/kip/localprov"
)

func main() {
	stateDir := flag.String("state-dir", "", "the local plugin's stateDir (absolute)")
	zone := flag.String("zone", "local", "the local plugin's zone")
	kubeconfigPath := flag.String("kubeconfig", "", "kubeconfig (empty: $KUBECONFIG, ~/.kube/config, else in-cluster)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, *kubeconfigPath, localprov.Config{StateDir: *stateDir, Zone: *zone}, log); err != nil {
		log.Error("kip-local-provisioner", "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfigPath string, cfg localprov.Config, log *slog.Logger) error {
	rc, source, err := kubeconfig.Load("--kubeconfig", kubeconfigPath)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	host, _ := os.Hostname()
	eb := record.NewBroadcaster(record.WithContext(ctx))
	eb.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: client.CoreV1().Events(corev1.NamespaceAll)})
	defer eb.Shutdown()
	// The external-provisioner's event source: the driver and the host.
	recorder := eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: localprov.Driver + "_" + host})
	p, err := localprov.New(client, cfg, recorder, log)
	if err != nil {
		return err
	}
	log.Info("starting", "kubeconfig", source)
	return p.Run(ctx)
}
