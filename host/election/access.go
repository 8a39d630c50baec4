package election

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RBACFile is the file that grants the election's identity the Lease.
const RBACFile = "deploy/rbac/kip-leader-election.yaml"

// leaseVerbs are what client-go's LeaseLock does with the Lease.
var leaseVerbs = []string{"get", "create", "update"}

// CanHold asks the API server whether client's identity may hold the Lease
// of cfg (after ForNode): who it is (a SelfSubjectReview) and whether it
// may get, create and update the Lease (SelfSubjectAccessReviews, which
// every authenticated identity may ask). Its error says what to change: a
// node identity never may (NodeRestriction), another is granted the Lease
// by RBACFile. An error of the requests themselves is returned wrapped.
func CanHold(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	user, groups, err := whoAmI(ctx, client)
	if err != nil {
		return err
	}
	lease := fmt.Sprintf("the Lease %s/%s", cfg.Namespace, cfg.LeaseName)
	if strings.HasPrefix(user, "system:node:") || slices.Contains(groups, "system:nodes") {
		return fmt.Errorf("leader election: the identity %s cannot hold %s: NodeRestriction admits a node's Leases only in kube-node-lease and named after the node; "+
			"give leaderElection.kubeconfig another identity (empty: the pod's ServiceAccount, kip-system/kip) and apply %s",
			describe(user, groups), lease, RBACFile)
	}
	var denied []string
	for _, verb := range leaseVerbs {
		attrs := &authorizationv1.ResourceAttributes{
			Namespace: cfg.Namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: cfg.LeaseName,
		}
		if verb == "create" {
			attrs.Name = "" // the authorizer never sees a new object's name
		}
		review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("leader election: asking whether %s may %s %s: %w", describe(user, groups), verb, lease, err)
		}
		if !review.Status.Allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("leader election: the identity %s may not %s %s (coordination.k8s.io leases); "+
			"apply %s, which grants them to the ServiceAccount kip-system/kip (edit its namespace and resourceNames where the Lease's differ), "+
			"or bind its Role to this identity", describe(user, groups), strings.Join(denied, ", "), lease, RBACFile)
	}
	return nil
}

// whoAmI is the user and groups the API server sees client as; "" when the
// server does not answer SelfSubjectReviews (before Kubernetes 1.28, or
// when forbidden), which is no reason to stop.
func whoAmI(ctx context.Context, client kubernetes.Interface) (user string, groups []string, err error) {
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
		return "", nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("leader election: asking the API server who kip is: %w", err)
	}
	return review.Status.UserInfo.Username, review.Status.UserInfo.Groups, nil
}

// describe names a user as errors show it.
func describe(user string, groups []string) string {
	if user == "" {
		return "kip uses for the election"
	}
	if len(groups) == 0 {
		return fmt.Sprintf("%q", user)
	}
	return fmt.Sprintf("%q (groups %s)", user, strings.Join(groups, ", "))
}
