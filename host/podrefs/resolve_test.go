package podrefs

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	cellapi "github.com/kipcell/kip/cell/api"
)

// fakeSource serves objects from maps and records token requests.
type fakeSource struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	tokens     []*authenticationv1.TokenRequest
}

func (f *fakeSource) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeSource) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f *fakeSource) ServiceAccountToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.tokens = append(f.tokens, req)
	out := req.DeepCopy()
	out.Status.Token = "token-for-" + ns + "-" + sa
	return out, nil
}

func newSource() *fakeSource {
	dockerCfg := `{"auths":{"https://registry.example:5000/v1/":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("alice:s3cret")) + `"}}}`
	return &fakeSource{
		configMaps: map[string]*corev1.ConfigMap{
			"ns/app": {Data: map[string]string{"MODE": "fast", "LEVEL": "3"}, BinaryData: map[string][]byte{"blob": {0, 1}}},
		},
		secrets: map[string]*corev1.Secret{
			"ns/db":   {Data: map[string][]byte{"password": []byte("hunter2")}},
			"ns/pull": {Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerCfg)}},
			"ns/bad":  {Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{")}},
		},
	}
}

func basePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:           "kip",
			ServiceAccountName: "runner",
			Containers:         []corev1.Container{{Name: "main"}},
		},
	}
}

var cell = Cell{PodIP: "10.213.0.7", HostIP: "10.213.0.7", MilliCPU: 2000, MemoryBytes: 4 << 30}

func envOf(req *cellapi.PodRequest, container string) map[string]string {
	out := map[string]string{}
	for _, v := range req.Env[container] {
		out[v.Name] = v.Value
	}
	return out
}

func TestResolveEnv(t *testing.T) {
	tests := []struct {
		name string
		c    corev1.Container
		want map[string]string
	}{
		{
			name: "plain values with $(VAR) expansion and escapes",
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", Value: "one"},
				{Name: "B", Value: "$(A)-two"},
				{Name: "C", Value: "$$(A) $(MISSING)"},
			}},
			want: map[string]string{"A": "one", "B": "one-two", "C": "$(A) $(MISSING)"},
		},
		{
			name: "downward API fields, with the cell's IP",
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "HOST", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
				{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			}},
			want: map[string]string{"POD": "web", "IP": "10.213.0.7", "HOST": "10.213.0.7", "APP": "web", "NODE": "kip"},
		},
		{
			name: "resource fields: set limits, divisors, and the cell size for unset limits",
			c: corev1.Container{
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
				Env: []corev1.EnvVar{
					{Name: "REQ_CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}},
					{Name: "REQ_CPU_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
					{Name: "LIM_MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
					{Name: "LIM_CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				},
			},
			want: map[string]string{"REQ_CPU": "1", "REQ_CPU_M": "250", "LIM_MEM_MI": "512", "LIM_CPU": "2"},
		},
		{
			name: "envFrom with prefix, overridden by env; configmap and secret keys",
			c: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
				Env: []corev1.EnvVar{
					{Name: "APP_MODE", Value: "slow"},
					{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
					{Name: "OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "x", Optional: ptr.To(true)}}},
				},
			},
			want: map[string]string{"APP_LEVEL": "3", "APP_MODE": "slow", "PW": "hunter2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := basePod()
			tt.c.Name = "main"
			pod.Spec.Containers = []corev1.Container{tt.c}
			req, err := Resolve(t.Context(), newSource(), Cluster{}, pod, cell, nil)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tt.want, envOf(req, "main")); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveEnvKeepsOrder(t *testing.T) {
	pod := basePod()
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "Z", Value: "1"}, {Name: "A", Value: "2"}, {Name: "M", Value: "3"}}
	req, err := Resolve(t.Context(), newSource(), Cluster{}, pod, cell, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range req.Env["main"] {
		names = append(names, v.Name)
	}
	if diff := cmp.Diff([]string{"Z", "A", "M"}, names); diff != "" {
		t.Errorf("env order (-want +got):\n%s", diff)
	}
}

func TestResolveMissingReferences(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*corev1.Pod)
		want string
	}{
		{"missing configmap", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}
		}, `configmap "absent" not found`},
		{"missing secret key", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "user"}}}}
		}, "couldn't find key user in secret ns/db"},
		{"missing volume secret", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}}}
		}, `volume v: secret "absent" not found`},
		{"broken pull secret", func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "bad"}}
		}, `image pull secret "bad" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := basePod()
			tt.mut(pod)
			_, err := Resolve(t.Context(), newSource(), Cluster{}, pod, cell, nil)
			var rerr *ResolveError
			if !errors.As(err, &rerr) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resolve = %v, want a ResolveError saying %q", err, tt.want)
			}
		})
	}
}

func TestResolveVolumes(t *testing.T) {
	pod := basePod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, DefaultMode: ptr.To[int32](0o600),
		}}},
		{Name: "pw", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "db", Items: []corev1.KeyToPath{{Key: "password", Path: "db/pw", Mode: ptr.To[int32](0o400)}},
		}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	src := newSource()
	req, err := Resolve(t.Context(), src, Cluster{}, pod, cell, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	modes := map[string]uint32{}
	for vol, files := range req.Volumes {
		got[vol] = map[string]string{}
		for p, data := range files.Files {
			got[vol][p] = string(data)
			modes[vol+"/"+p] = files.Modes[p]
		}
	}
	want := map[string]map[string]string{
		"cfg":             {"MODE": "fast", "LEVEL": "3", "blob": "\x00\x01"},
		"pw":              {"db/pw": "hunter2"},
		"info":            {"name": "web"},
		"kube-api-access": {"token": "token-for-ns-runner", "namespace": "ns"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("volume files (-want +got):\n%s", diff)
	}
	if modes["cfg/MODE"] != 0o600 || modes["pw/db/pw"] != 0o400 || modes["info/name"] != 0o644 {
		t.Errorf("modes = %v", modes)
	}
	if len(src.tokens) != 1 || src.tokens[0].Spec.BoundObjectRef.UID != "uid-1" || *src.tokens[0].Spec.ExpirationSeconds != 3607 {
		t.Errorf("token requests = %+v, want one bound to the pod with the projection's expiry", src.tokens)
	}
}

func TestResolvePullCredentials(t *testing.T) {
	pod := basePod()
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}, {Name: "absent"}}
	req, err := Resolve(t.Context(), newSource(), Cluster{}, pod, cell, nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := req.RegistryCredentials
	if len(creds) != 1 || creds[0].Server != "registry.example:5000" || creds[0].Username != "alice" || creds[0].Password != "s3cret" {
		t.Errorf("credentials = %v", creds)
	}
}

// TestResolveEphemeralContainerEnv: an ephemeral container (kubectl
// debug) gets its environment resolved as the pod's containers do; one
// whose references are missing does not fail the running pod's update.
func TestResolveEphemeralContainerEnv(t *testing.T) {
	pod := basePod()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{
		{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Env: []corev1.EnvVar{
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		}}},
		{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "broken", Env: []corev1.EnvVar{
			{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}},
		}}},
	}
	req, err := Resolve(t.Context(), newSource(), Cluster{}, pod, cell, nil)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if diff := cmp.Diff([]cellapi.EnvVar{{Name: "POD", Value: "web"}}, req.Env["debugger"]); diff != "" {
		t.Errorf("debugger env (-want +got):\n%s", diff)
	}
	if env, ok := req.Env["broken"]; ok {
		t.Errorf("broken env = %v, want none (the agent's literal values)", env)
	}
}
