package cells

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Annotations that shape a cell's instance beyond its type. A plugin
// without the matching capability refuses them (Unsupported), which the
// pod shows as a LaunchFailed event. Which security groups and instance
// profiles a pod may ask for is the plugin's to decide, from allow-lists
// in its configuration (pluginapi.LaunchRequest says so): the values are
// the cloud's, and the plugin holds the defaults they extend, so the host
// passes them on without a second list of its own.
const (
	// AnnotationSecurityGroups lists security group IDs, comma-separated,
	// added to the plugin's base groups.
	AnnotationSecurityGroups = "kipcell.io/security-groups"
	// AnnotationInstanceProfile names the instance profile (a name or an
	// ARN) the cell runs with, instead of the plugin's default.
	AnnotationInstanceProfile = "kipcell.io/instance-profile"
	// AnnotationVolumeSize is the root volume's size: a quantity such as
	// "50Gi", or a number of GiB.
	AnnotationVolumeSize = "kipcell.io/volume-size"
)

// launchOptions are the per-pod LaunchRequest fields from annotations.
type launchOptions struct {
	securityGroups  []string
	instanceProfile string
	volumeSizeGiB   int32
}

// podLaunchOptions reads the pod's launch annotations; an error names the
// annotation and what is wrong with it.
func podLaunchOptions(pod *corev1.Pod) (launchOptions, error) {
	var o launchOptions
	a := pod.Annotations
	if v := strings.TrimSpace(a[AnnotationSecurityGroups]); v != "" {
		for _, g := range strings.Split(v, ",") {
			g = strings.TrimSpace(g)
			if g == "" {
				return o, fmt.Errorf("annotation %s %q has an empty entry", AnnotationSecurityGroups, v)
			}
			o.securityGroups = append(o.securityGroups, g)
		}
	}
	o.instanceProfile = strings.TrimSpace(a[AnnotationInstanceProfile])
	if v := strings.TrimSpace(a[AnnotationVolumeSize]); v != "" {
		gib, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			q, qerr := resource.ParseQuantity(v)
			if qerr != nil || q.Sign() <= 0 || q.AsApproximateFloat64() > 1<<50 {
				return o, fmt.Errorf("annotation %s %q is not a size such as 50Gi", AnnotationVolumeSize, v)
			}
			gib = (q.Value() + 1<<30 - 1) >> 30 // round up to whole GiB
		}
		if gib <= 0 || gib > 1<<20 {
			return o, fmt.Errorf("annotation %s %q is not a size such as 50Gi", AnnotationVolumeSize, v)
		}
		o.volumeSizeGiB = int32(gib)
	}
	return o, nil
}
