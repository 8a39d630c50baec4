//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/e2e/framework"
)

// TestAnnotationRefusedByTheAllowList: a pod that names an instance
// profile the operator did not list (the e2e configuration lists none)
// gets a Warning event naming the annotation and the profile, and no
// instance is launched for it.
func TestAnnotationRefusedByTheAllowList(t *testing.T) {
	framework.Only(t, framework.PluginAWS) // the aws plugin's instance-profile annotation
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	settle(t, ns)
	const profile = "arn:aws:iam::123456789012:instance-profile/account-admin"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ambitious", Annotations: map[string]string{"kipcell.io/instance-profile": profile}},
		Spec:       onKip(corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref}),
	}
	created := f.CreatePod(t, ns, pod)
	var events string
	f.WaitFor(t, 60*time.Second, "a Warning event naming the annotation and the profile", func(context.Context) (bool, error) {
		events = podEvents(t, ns, pod.Name)
		for _, line := range strings.Split(events, "\n") {
			if strings.HasPrefix(line, "Warning ") && strings.Contains(line, "kipcell.io/instance-profile") && strings.Contains(line, profile) {
				return true, nil
			}
		}
		return false, nil
	})
	for _, in := range kip.EC2.Instances() {
		if in.Tags[pluginapi.TagPodUID] == string(created.UID) || in.IamInstanceProfile == profile {
			t.Errorf("instance %s (%s, profile %q) was launched for the refused pod", in.ID, in.State, in.IamInstanceProfile)
		}
	}
	t.Logf("events of the refused pod:\n%s", events)
}
