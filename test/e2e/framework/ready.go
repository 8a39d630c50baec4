package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitNodeReady waits until k's node is Ready: kip registered it and
// reports it healthy.
func (f *Framework) waitNodeReady(ctx context.Context, k *Kip) error {
	return Poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		if err := k.exitedDuringStart(); err != nil {
			return false, err
		}
		n, err := f.Client.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// waitStandingBy waits until k's election has seen a leader (another
// kip, or k itself): a kip started beside a leader is then a standby.
func (k *Kip) waitStandingBy(ctx context.Context) error {
	return Poll(ctx, 60*time.Second, func(context.Context) (bool, error) {
		if err := k.exitedDuringStart(); err != nil {
			return false, err
		}
		data, _ := os.ReadFile(k.LogPath)
		return strings.Contains(string(data), "leader election: standing by") ||
			strings.Contains(string(data), "leader election: this process leads"), nil
	})
}

// exitedDuringStart is an error with the last lines of kip's log once
// the kip process has exited, nil while it runs.
func (k *Kip) exitedDuringStart() error {
	select {
	case <-k.done:
		return fmt.Errorf("kip exited during start-up; last lines of %s:\n%s", k.LogPath, k.LogTail(40))
	default:
		return nil
	}
}
