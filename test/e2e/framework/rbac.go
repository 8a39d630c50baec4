package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// applyRBAC applies deploy/rbac/*.yaml for node (rbacFor), as an
// administrator installing kip for it does.
func (f *Framework) applyRBAC(ctx context.Context, node string) error {
	kubectl := filepath.Join(f.Cluster.BinDir, "kubectl")
	rbacDir, err := repoFile("deploy/rbac")
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(rbacDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		if err != nil {
			return fmt.Errorf("reading RBAC: %w", err)
		}
		return errors.New("reading RBAC: no deploy/rbac/*.yaml")
	}
	var rbac []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("reading RBAC: %w", err)
		}
		rbac = append(rbac, rbacFor(string(data), node))
	}
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(strings.Join(rbac, "\n---\n"))
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("applying deploy/rbac: %w\n%s", err, out)
	}
	return nil
}

// rbacFor adapts one deploy/rbac file to node: its User, and for another
// node than "kip" the names of its cluster-wide grants and of its Lease.
func rbacFor(data, node string) string {
	grant := strings.ReplaceAll(data, "system:node:kip", "system:node:"+node)
	if node != "kip" {
		// Cluster-wide grants get a name per node: applied again
		// under the same name, they would take the grant away from
		// the nodes of the run's other kips, whose watches go on.
		grant = strings.ReplaceAll(grant, "name: kip-endpointslices", "name: kip-endpointslices-"+node)
		// The election's Role names its node's Lease.
		grant = strings.ReplaceAll(grant, "name: kip-leader-election", "name: kip-leader-election-"+node)
		grant = strings.ReplaceAll(grant, `resourceNames: ["kip-kip"]`, `resourceNames: ["kip-`+node+`"]`)
	}
	return grant
}
