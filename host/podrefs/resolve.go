package podrefs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/expansion"
)

// Source reads what a pod references. With kip's node identity the Node
// authorizer allows exactly the objects of pods bound to the node.
type Source interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ServiceAccountToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// ClientSource reads through the API with client (direct GETs: a node may
// not list or watch Secrets cluster-wide).
func ClientSource(client kubernetes.Interface) Source { return clientSource{client} }

type clientSource struct{ c kubernetes.Interface }

func (s clientSource) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return s.c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s clientSource) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return s.c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s clientSource) ServiceAccountToken(ctx context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return s.c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
}

// Cell is what resolution needs to know of the cell a pod runs on.
type Cell struct {
	PodIP  string
	HostIP string
	// MilliCPU and MemoryBytes stand in for node allocatable when a
	// resourceFieldRef names a limit the container does not set.
	MilliCPU    int64
	MemoryBytes int64
}

// ResolveError is a reference that cannot be resolved (a missing ConfigMap
// or key that is not optional). The pod cannot start until it exists; the
// message says exactly what is missing, as a kubelet's
// CreateContainerConfigError does.
type ResolveError struct{ Message string }

func (e *ResolveError) Error() string { return e.Message }

// Resolve builds the ApplyPod request for pod on cell (without the
// generation): the environment of every container (with the service
// variables of cluster's Services), the files of its configMap, secret,
// downwardAPI and projected volumes, the registry credentials of its
// imagePullSecrets, and the cluster's DNS settings. Service account
// tokens come from tokens, the pod's, which requests them when it has
// none or they need refreshing; nil requests every one.
func Resolve(ctx context.Context, src Source, cluster Cluster, pod *corev1.Pod, cell Cell, tokens *Tokens) (*cellapi.PodRequest, error) {
	podJSON, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encoding pod: %w", err)
	}
	return ResolveEncoded(ctx, src, cluster, pod, podJSON, cell, tokens)
}

// ResolveEncoded is Resolve with the pod already encoded as JSON (the
// request's PodJSON, which it does not copy): a refresh of a pod that did
// not change reuses the encoding it sent, which was most of a refresh's
// work (a CPU profile of kip idle with a thousand pods).
func ResolveEncoded(ctx context.Context, src Source, cluster Cluster, pod *corev1.Pod, podJSON []byte, cell Cell, tokens *Tokens) (*cellapi.PodRequest, error) {
	// The API server defaults enableServiceLinks to true.
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	serviceEnv, err := cluster.serviceEnv(pod.Namespace, links)
	if err != nil {
		return nil, err
	}
	dns, err := cluster.clusterDNS()
	if err != nil {
		return nil, err
	}
	if tokens == nil {
		tokens = NewTokens(nil)
	}
	tokens.begin()
	r := &resolver{ctx: ctx, src: src, tokens: tokens, pod: pod, cell: cell, serviceEnv: serviceEnv}
	req := &cellapi.PodRequest{PodJSON: podJSON, Env: map[string][]cellapi.EnvVar{}, Volumes: map[string]cellapi.VolumeFiles{}, ClusterDNS: dns}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range all {
		env, err := r.env(&all[i])
		if err != nil {
			return nil, err
		}
		req.Env[all[i].Name] = env
	}
	// Ephemeral containers (kubectl debug) get the environment the
	// kubelet gives them, the service variables too. One whose variables
	// cannot be resolved must not stop the running pod's update: it gets
	// the literal values of its spec (the agent's fallback).
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		env, err := r.env(c)
		if err != nil {
			continue
		}
		req.Env[c.Name] = env
	}
	for i := range pod.Spec.Volumes {
		files, err := r.volume(&pod.Spec.Volumes[i])
		if err != nil {
			return nil, err
		}
		if files != nil {
			req.Volumes[pod.Spec.Volumes[i].Name] = *files
		}
	}
	creds, err := r.pullCredentials()
	if err != nil {
		return nil, err
	}
	req.RegistryCredentials = creds
	tokens.prune()
	return req, nil
}

type resolver struct {
	ctx    context.Context
	src    Source
	tokens *Tokens
	pod    *corev1.Pod
	cell   Cell
	// serviceEnv are the variables of the Services the pod sees.
	serviceEnv []cellapi.EnvVar
}

func (r *resolver) missing(format string, args ...any) error {
	return &ResolveError{Message: fmt.Sprintf(format, args...)}
}

func (r *resolver) configMap(name string, optional *bool) (*corev1.ConfigMap, error) {
	cm, err := r.src.ConfigMap(r.ctx, r.pod.Namespace, name)
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, r.missing("configmap %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading configmap %s/%s: %w", r.pod.Namespace, name, err)
	}
	return cm, nil
}

func (r *resolver) secret(name string, optional *bool) (*corev1.Secret, error) {
	s, err := r.src.Secret(r.ctx, r.pod.Namespace, name)
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, r.missing("secret %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", r.pod.Namespace, name, err)
	}
	return s, nil
}

// env resolves a container's environment the way the kubelet's
// makeEnvironmentVariables does (pkg/kubelet/kubelet_pods.go): envFrom
// sources in order, then env entries overriding them, with $(VAR)
// references expanded against what is defined so far and then the
// service variables; last the service variables the container does not
// define itself (they never override its own).
func (r *resolver) env(c *corev1.Container) ([]cellapi.EnvVar, error) {
	var order []string
	values := map[string]string{}
	// scope is what $(VAR) sees: the container's variables over the
	// services' (the kubelet's MappingFuncFor(tmpEnv, serviceEnv)).
	scope := map[string]string{}
	for _, v := range r.serviceEnv {
		scope[v.Name] = v.Value
	}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			order = append(order, name)
		}
		values[name] = value
		scope[name] = value
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := r.configMap(from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
			if err != nil || cm == nil {
				return nil, err
			}
			for _, k := range sortedKeys(cm.Data) {
				set(from.Prefix+k, cm.Data[k])
			}
		case from.SecretRef != nil:
			s, err := r.secret(from.SecretRef.Name, from.SecretRef.Optional)
			if err != nil || s == nil {
				return nil, err
			}
			for _, k := range sortedKeys(s.Data) {
				set(from.Prefix+k, string(s.Data[k]))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expansion.Expand(e.Value, scope))
			continue
		}
		v, ok, err := r.valueFrom(c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("resolving env %s of container %s: %w", e.Name, c.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	var out []cellapi.EnvVar
	for _, name := range order {
		out = append(out, cellapi.EnvVar{Name: name, Value: values[name]})
	}
	for _, v := range r.serviceEnv {
		if _, own := values[v.Name]; !own {
			out = append(out, v)
		}
	}
	return out, nil
}

func (r *resolver) valueFrom(c *corev1.Container, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := r.field(src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := r.resourceField(c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := r.configMap(ref.Name, ref.Optional)
		if err != nil || cm == nil {
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if ref.Optional != nil && *ref.Optional {
				return "", false, nil
			}
			return "", false, r.missing("couldn't find key %s in configmap %s/%s", ref.Key, r.pod.Namespace, ref.Name)
		}
		return v, true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.secret(ref.Name, ref.Optional)
		if err != nil || s == nil {
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if ref.Optional != nil && *ref.Optional {
				return "", false, nil
			}
			return "", false, r.missing("couldn't find key %s in secret %s/%s", ref.Key, r.pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, nil
}

// field resolves a Downward API field path.
func (r *resolver) field(path string) (string, error) {
	p := r.pod
	if k, ok := subscript(path, "metadata.labels"); ok {
		return p.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return p.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "metadata.labels":
		return formatMap(p.Labels), nil
	case "metadata.annotations":
		return formatMap(p.Annotations), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return r.cell.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return r.cell.HostIP, nil
	}
	return "", r.missing("unsupported fieldRef %q", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

func formatMap(m map[string]string) string {
	var lines []string
	for _, k := range sortedKeys(m) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceField resolves limits.* and requests.* of a container, with the
// cell's size standing in for an unset limit, as node allocatable does on
// a kubelet.
func (r *resolver) resourceField(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	target := c
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		target = nil
		all := append(append([]corev1.Container{}, r.pod.Spec.InitContainers...), r.pod.Spec.Containers...)
		for i := range all {
			if all[i].Name == ref.ContainerName {
				target = &all[i]
			}
		}
		if target == nil {
			return "", r.missing("resourceFieldRef names unknown container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", r.missing("unsupported resourceFieldRef %q", ref.Resource)
	}
	list := target.Resources.Limits
	if kind == "requests" {
		list = target.Resources.Requests
	}
	q, set := list[corev1.ResourceName(name)]
	if !set {
		switch {
		case name == "cpu" && kind == "limits":
			q = *resource.NewMilliQuantity(r.cell.MilliCPU, resource.DecimalSI)
		case name == "memory" && kind == "limits":
			q = *resource.NewQuantity(r.cell.MemoryBytes, resource.BinarySI)
		default:
			q = resource.Quantity{}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		// Round up, as the kubelet does: 100m with divisor 1 is "1".
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// volume resolves the files of a configMap, secret, downwardAPI or
// projected volume; other kinds (emptyDir, hostPath, ...) are the agent's
// and give nil.
func (r *resolver) volume(v *corev1.Volume) (*cellapi.VolumeFiles, error) {
	files := &cellapi.VolumeFiles{Files: map[string][]byte{}, Modes: map[string]uint32{}}
	var defaultMode *int32
	switch {
	case v.ConfigMap != nil:
		defaultMode = v.ConfigMap.DefaultMode
		if err := r.addConfigMap(files, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, defaultMode); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	case v.Secret != nil:
		defaultMode = v.Secret.DefaultMode
		if err := r.addSecret(files, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, defaultMode); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	case v.DownwardAPI != nil:
		if err := r.addDownward(files, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	case v.Projected != nil:
		defaultMode = v.Projected.DefaultMode
		for _, s := range v.Projected.Sources {
			var err error
			switch {
			case s.ConfigMap != nil:
				err = r.addConfigMap(files, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, defaultMode)
			case s.Secret != nil:
				err = r.addSecret(files, s.Secret.Name, s.Secret.Items, s.Secret.Optional, defaultMode)
			case s.DownwardAPI != nil:
				err = r.addDownward(files, s.DownwardAPI.Items, defaultMode)
			case s.ServiceAccountToken != nil:
				err = r.addToken(files, s.ServiceAccountToken, defaultMode)
			case s.ClusterTrustBundle != nil:
				err = r.missing("clusterTrustBundle projections are not supported yet")
			}
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
	default:
		return nil, nil
	}
	return files, nil
}

func mode(item *int32, def *int32) uint32 {
	switch {
	case item != nil:
		return uint32(*item)
	case def != nil:
		return uint32(*def)
	default:
		return 0o644
	}
}

func (r *resolver) addConfigMap(files *cellapi.VolumeFiles, name string, items []corev1.KeyToPath, optional *bool, def *int32) error {
	cm, err := r.configMap(name, optional)
	if err != nil || cm == nil {
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return r.addKeys(files, "configmap", name, data, items, optional, def)
}

func (r *resolver) addSecret(files *cellapi.VolumeFiles, name string, items []corev1.KeyToPath, optional *bool, def *int32) error {
	s, err := r.secret(name, optional)
	if err != nil || s == nil {
		return err
	}
	return r.addKeys(files, "secret", name, s.Data, items, optional, def)
}

func (r *resolver) addKeys(files *cellapi.VolumeFiles, kind, name string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, def *int32) error {
	if len(items) == 0 {
		for _, k := range sortedKeys(data) {
			files.Files[k] = data[k]
			files.Modes[k] = mode(nil, def)
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return r.missing("couldn't find key %s in %s %s/%s", it.Key, kind, r.pod.Namespace, name)
		}
		files.Files[it.Path] = v
		files.Modes[it.Path] = mode(it.Mode, def)
	}
	return nil
}

func (r *resolver) addDownward(files *cellapi.VolumeFiles, items []corev1.DownwardAPIVolumeFile, def *int32) error {
	for _, it := range items {
		var (
			v   string
			err error
		)
		switch {
		case it.FieldRef != nil:
			v, err = r.field(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := &corev1.Container{}
			if len(r.pod.Spec.Containers) > 0 {
				c = &r.pod.Spec.Containers[0]
			}
			v, err = r.resourceField(c, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		files.Files[it.Path] = []byte(v)
		files.Modes[it.Path] = mode(it.Mode, def)
	}
	return nil
}

// addToken gets a token bound to the pod for its service account, as the
// kubelet does for projected serviceAccountToken sources: the projection's
// audience (none: the API server's own) and expirationSeconds (default
// one hour), the file mode of the projected volume.
func (r *resolver) addToken(files *cellapi.VolumeFiles, src *corev1.ServiceAccountTokenProjection, def *int32) error {
	sa := r.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64(3600)
	if src.ExpirationSeconds != nil {
		expiry = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expiry,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.pod.Name, UID: r.pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := r.tokens.token(r.ctx, r.src, r.pod.Namespace, sa, req)
	if err != nil {
		return fmt.Errorf("requesting a token for service account %s/%s: %w", r.pod.Namespace, sa, err)
	}
	files.Files[src.Path] = []byte(tr.Status.Token)
	files.Modes[src.Path] = mode(nil, def)
	return nil
}

// dockerConfig is the JSON of a kubernetes.io/dockerconfigjson secret.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
}

// pullCredentials reads the pod's imagePullSecrets (dockerconfigjson and
// the older dockercfg). A missing pull secret is not fatal, as on a
// kubelet: the pull may still work anonymously.
func (r *resolver) pullCredentials() ([]cellapi.RegistryCredential, error) {
	var out []cellapi.RegistryCredential
	for _, ref := range r.pod.Spec.ImagePullSecrets {
		optional := true
		s, err := r.secret(ref.Name, &optional)
		if err != nil {
			return nil, err
		}
		if s == nil {
			continue
		}
		var auths map[string]dockerAuth
		switch s.Type {
		case corev1.SecretTypeDockerConfigJson:
			var cfg dockerConfig
			if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
				return nil, r.missing("image pull secret %q is not valid %s: %v", ref.Name, corev1.DockerConfigJsonKey, err)
			}
			auths = cfg.Auths
		case corev1.SecretTypeDockercfg:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &auths); err != nil {
				return nil, r.missing("image pull secret %q is not valid %s: %v", ref.Name, corev1.DockerConfigKey, err)
			}
		default:
			continue
		}
		for _, server := range sortedKeys(auths) {
			a := auths[server]
			if a.Auth != "" && a.Username == "" {
				if raw, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
					a.Username, a.Password, _ = strings.Cut(string(raw), ":")
				}
			}
			out = append(out, cellapi.RegistryCredential{
				Server: normalizeRegistry(server), Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken,
			})
		}
	}
	return out, nil
}

// normalizeRegistry turns "https://index.docker.io/v1/" into "index.docker.io".
func normalizeRegistry(server string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	s, _, _ = strings.Cut(s, "/")
	return s
}
