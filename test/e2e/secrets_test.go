//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/test/e2e/framework"
)

// saDir is where the API server mounts a pod's kube-api-access volume.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// mounting is a sleeper with mounts.
func mounting(mounts ...corev1.VolumeMount) corev1.Container {
	c := sleeper()
	c.VolumeMounts = mounts
	return c
}

// fsType is the file system type of the mount at path inside the pod,
// from /proc/mounts.
func fsType(t *testing.T, ns, pod, path string) string {
	t.Helper()
	for _, line := range strings.Split(inPod(t, ns, pod, "cat /proc/mounts"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == path {
			return f[2]
		}
	}
	t.Fatalf("in pod %s: nothing mounted at %s", pod, path)
	return ""
}

// putSecret creates or replaces Secret name in ns.
func putSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
	_, err := f.Client.CoreV1().Secrets(ns).Update(t.Context(), s, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = f.Client.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("writing secret %s: %v", name, err)
	}
}

// putConfigMap creates or replaces ConfigMap name in ns.
func putConfigMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
	_, err := f.Client.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = f.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("writing configmap %s: %v", name, err)
	}
}

// TestSecretVolumes: a Secret volume and a projected Secret reach the
// container with their contents and modes (defaultMode, items with their
// own mode), on a tmpfs the container sees, and an optional Secret that
// does not exist gives an empty volume.
func TestSecretVolumes(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	putSecret(t, ns, "s1", map[string][]byte{"k": []byte("value-1"), "other": []byte("value-2")})
	spec := onKip(mounting(
		corev1.VolumeMount{Name: "plain", MountPath: "/s"},
		corev1.VolumeMount{Name: "mapped", MountPath: "/p"},
		corev1.VolumeMount{Name: "missing", MountPath: "/m"},
	))
	spec.Volumes = []corev1.Volume{
		{Name: "plain", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1", DefaultMode: ptr.To[int32](0o440)}}},
		{Name: "mapped", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "s1"},
				Items:                []corev1.KeyToPath{{Key: "k", Path: "dir/renamed", Mode: ptr.To[int32](0o400)}},
			},
		}}}}},
		{Name: "missing", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope", Optional: ptr.To(true)}}},
	}
	runPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "secrets"}, Spec: spec})

	got := inPod(t, ns, "secrets", "cat /s/k; echo; stat -L -c %a /s/k /s/other; cat /p/dir/renamed; echo; stat -L -c %a /p/dir/renamed; ls /p; ls /m | wc -l")
	want := "value-1\n440\n440\nvalue-1\n400\ndir\n0\n"
	if got != want {
		t.Errorf("inside the container:\n%s\nwant:\n%s", got, want)
	}
	for _, path := range []string{"/s", "/p"} {
		if typ := fsType(t, ns, "secrets", path); typ != "tmpfs" {
			t.Errorf("%s is on %s, want tmpfs: secrets stay off the disk", path, typ)
		}
	}
}

// TestServiceAccountToken: the kube-api-access volume the API server adds
// to a pod holds a token the API server accepts as the pod's service
// account, bound to the pod and node, the cluster CA and the namespace; a
// projected serviceAccountToken source gets its audience and expiration;
// automountServiceAccountToken: false gives no token at all.
func TestServiceAccountToken(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	if _, err := f.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := onKip(mounting(corev1.VolumeMount{Name: "vault", MountPath: "/vault"}))
	spec.ServiceAccountName = "robot"
	spec.Volumes = []corev1.Volume{{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "vault", ExpirationSeconds: ptr.To[int64](7200), Path: "token",
		}}},
	}}}}
	noMount := onKip(sleeper())
	noMount.AutomountServiceAccountToken = ptr.To(false)

	// Both pods start at once: each cell takes a few seconds.
	for name, spec := range map[string]corev1.PodSpec{"tokens": spec, "no-token": noMount} {
		f.CreatePod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}}, Spec: spec})
	}
	pod := f.WaitForPods(t, ns, "pod=tokens", 1, 90*time.Second, "Running", running)[0]
	f.WaitForPods(t, ns, "pod=no-token", 1, 90*time.Second, "Running", running)

	token := inPod(t, ns, "tokens", "cat "+saDir+"/token")
	if got := inPod(t, ns, "tokens", "cat "+saDir+"/namespace"); got != ns {
		t.Errorf("namespace file = %q, want %q", got, ns)
	}
	rootCA, err := f.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inPod(t, ns, "tokens", "cat "+saDir+"/ca.crt"); got != rootCA.Data["ca.crt"] {
		t.Errorf("ca.crt = %q, want the kube-root-ca.crt ConfigMap's", got)
	}
	if typ := fsType(t, ns, "tokens", saDir); typ != "tmpfs" {
		t.Errorf("%s is on %s, want tmpfs: tokens stay off the disk", saDir, typ)
	}

	node, err := f.Client.CoreV1().Nodes().Get(ctx, kip.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	review := tokenReview(t, token, nil)
	if want := "system:serviceaccount:" + ns + ":robot"; review.User.Username != want {
		t.Errorf("token is %q, want %q", review.User.Username, want)
	}
	for key, want := range map[string]string{
		"authentication.kubernetes.io/pod-name":  pod.Name,
		"authentication.kubernetes.io/pod-uid":   string(pod.UID),
		"authentication.kubernetes.io/node-name": node.Name,
		"authentication.kubernetes.io/node-uid":  string(node.UID),
	} {
		if got := review.User.Extra[key]; len(got) != 1 || got[0] != want {
			t.Errorf("token's %s = %v, want %s", key, got, want)
		}
	}

	vault := inPod(t, ns, "tokens", "cat /vault/token")
	if review := tokenReview(t, vault, []string{"vault"}); review.User.Username != "system:serviceaccount:"+ns+":robot" {
		t.Errorf("vault token is %q", review.User.Username)
	}
	claims := jwtClaims(t, vault)
	if !slices.Equal(claims.Audience, []string{"vault"}) {
		t.Errorf("vault token's audience = %v, want [vault]", claims.Audience)
	}
	if got := claims.Expiry - claims.IssuedAt; got != 7200 {
		t.Errorf("vault token lives %ds, want expirationSeconds 7200", got)
	}
	if got := inPod(t, ns, "tokens", "stat -L -c %a /vault/token"); got != "644\n" {
		t.Errorf("vault token mode = %q, want the projection's default 644", got)
	}

	out, code := kubectl(t, "exec", "-n", ns, "no-token", "-c", "main", "--", "ls", saDir)
	if code == 0 {
		t.Errorf("automountServiceAccountToken: false, yet %s holds: %s", saDir, out)
	}
}

// tokenReview asks the API server whether it accepts token (for
// audiences, nil meaning its own) and fails the test if not.
func tokenReview(t *testing.T, token string, audiences []string) authenticationv1.TokenReviewStatus {
	t.Helper()
	r, err := f.Client.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Status.Authenticated || r.Status.Error != "" {
		t.Fatalf("the API server refuses the token (audiences %v): %q", audiences, r.Status.Error)
	}
	return r.Status
}

// claims are the JWT claims the tests look at.
type claims struct {
	Audience []string `json:"aud"`
	Expiry   int64    `json:"exp"`
	IssuedAt int64    `json:"iat"`
}

// jwtClaims decodes the payload of a JWT (the API server has checked its
// signature).
func jwtClaims(t *testing.T, token string) claims {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("decoding the token's payload: %v", err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatalf("decoding the token's claims: %v", err)
	}
	return c
}

// waitFile waits until the file at path in the pod holds want.
func waitFile(t *testing.T, ns, pod, path, want string, timeout time.Duration) {
	t.Helper()
	f.WaitFor(t, timeout, fmt.Sprintf("%s in pod %s to hold %q", path, pod, want), func(context.Context) (bool, error) {
		out, code := kubectl(t, "exec", "-n", ns, pod, "-c", "main", "--", "cat", path)
		return code == 0 && out == want, nil
	})
}

// TestVolumesFollowTheirObjects: a changed Secret and ConfigMap, and an
// optional Secret created after the pod, reach the running container's
// volumes (kip resolves them again every
// framework.VolumeRefreshInterval) without restarting it. Token refresh
// follows the same path on its own schedule (80 % of a lifetime of at
// least 10 minutes): host/cells and host/podrefs test that rule with a
// clock they move.
func TestVolumesFollowTheirObjects(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	putSecret(t, ns, "s1", map[string][]byte{"k": []byte("one")})
	putConfigMap(t, ns, "c1", map[string]string{"k": "one"})
	spec := onKip(mounting(
		corev1.VolumeMount{Name: "secret", MountPath: "/s"},
		corev1.VolumeMount{Name: "config", MountPath: "/c"},
		corev1.VolumeMount{Name: "later", MountPath: "/l"},
	))
	spec.Volumes = []corev1.Volume{
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1"}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "c1"}}}},
		{Name: "later", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s2", Optional: ptr.To(true)}}},
	}
	runPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "follows"}, Spec: spec})
	if got := inPod(t, ns, "follows", "cat /s/k /c/k; ls /l | wc -l"); got != "oneone0\n" {
		t.Fatalf("before the changes: %q", got)
	}

	putSecret(t, ns, "s1", map[string][]byte{"k": []byte("two")})
	putConfigMap(t, ns, "c1", map[string]string{"k": "two"})
	putSecret(t, ns, "s2", map[string][]byte{"new": []byte("here")})
	timeout := 10*framework.VolumeRefreshInterval + 20*time.Second
	waitFile(t, ns, "follows", "/s/k", "two", timeout)
	waitFile(t, ns, "follows", "/c/k", "two", timeout)
	waitFile(t, ns, "follows", "/l/new", "here", timeout)

	pod, err := f.Client.CoreV1().Pods(ns).Get(t.Context(), "follows", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := pod.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("the container restarted %d times: new files must not restart it", n)
	}
}
