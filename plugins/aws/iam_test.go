package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// policyPath is the plugin's IAM policy, which operators attach to kip's
// role.
const policyPath = "../../deploy/aws/iam-policy.json"

// impliedActions are actions no SDK method names: RunInstances with
// TagSpecifications needs ec2:CreateTags, and with an instance profile
// iam:PassRole for the profile's role; the ECR token RegistryAuth hands
// to the cells acts with kip's own permissions, so the cells' image pulls
// need the pull actions on kip's role.
var impliedActions = []string{
	"ec2:CreateTags", "iam:PassRole",
	"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
}

// The policy's placeholders, each explained in deploy/aws/README.md, and
// the values the tests fill them with.
var policyPlaceholders = map[string]string{
	"PARTITION":  "aws",
	"REGION":     "us-east-1",
	"ACCOUNT_ID": "123456789012",
	"CLUSTER_ID": testCluster,
	"CELL_ROLE":  "kip-cell",
}

// policyStatement is one statement of an IAM policy, as the evaluator
// below reads it.
type policyStatement struct {
	Sid       string
	Effect    string
	Action    stringList
	Resource  stringList
	Condition map[string]map[string]stringList
}

// stringList is IAM's string-or-list.
type stringList []string

func (l *stringList) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*l = []string{one}
		return nil
	}
	return json.Unmarshal(data, (*[]string)(l))
}

// loadPolicy reads the policy template, fills its placeholders and checks
// that it has exactly those, and hard-codes no partition or region.
func loadPolicy(t *testing.T) []policyStatement {
	t.Helper()
	data, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	var found []string
	for _, m := range regexp.MustCompile(`\$\{([^}]*)\}`).FindAllStringSubmatch(text, -1) {
		found = append(found, m[1])
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(policyPlaceholders)), slices.Compact(slices.Sorted(slices.Values(found)))); diff != "" {
		t.Errorf("%s has other placeholders than deploy/aws/README.md explains (-want +got):\n%s", policyPath, diff)
	}
	readme, err := os.ReadFile("../../deploy/aws/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for k := range policyPlaceholders {
		if !strings.Contains(string(readme), "`${"+k+"}`") {
			t.Errorf("deploy/aws/README.md does not explain the policy's placeholder ${%s}", k)
		}
	}
	for _, hard := range []string{"arn:aws:", "arn:aws-", `"aws"`, "us-east-1"} {
		if strings.Contains(text, hard) {
			t.Errorf("%s hard-codes %s: use the placeholders", policyPath, hard)
		}
	}
	for k, v := range policyPlaceholders {
		text = strings.ReplaceAll(text, "${"+k+"}", v)
	}
	var policy struct {
		Version   string
		Statement []policyStatement
	}
	if err := json.Unmarshal([]byte(text), &policy); err != nil {
		t.Fatalf("%s: %v", policyPath, err)
	}
	if policy.Version != "2012-10-17" {
		t.Errorf("policy version %q, want 2012-10-17", policy.Version)
	}
	return policy.Statement
}

// allows reports whether an Allow statement of the policy grants action on
// resource in a request with the condition keys context; there are no Deny
// statements. It knows the condition operators the policy uses, and fails
// the test on others, so that a new operator is taught to it rather than
// ignored.
func allows(t *testing.T, policy []policyStatement, action, resource string, context map[string]string) bool {
	t.Helper()
	for _, s := range policy {
		if s.Effect != "Allow" || !slices.ContainsFunc(s.Action, func(a string) bool { return globMatch(a, action) }) ||
			!slices.ContainsFunc(s.Resource, func(r string) bool { return globMatch(r, resource) }) {
			continue
		}
		ok := true
		for op, keys := range s.Condition {
			for key, values := range keys {
				v, present := context[key]
				switch op {
				case "StringEquals":
					ok = ok && present && slices.Contains(values, v)
				case "Null":
					ok = ok && len(values) == 1 && (values[0] == "true") == !present
				default:
					t.Fatalf("statement %s: condition operator %s is unknown to this test", s.Sid, op)
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// globMatch matches IAM's wildcards: * any run of characters, ? one.
func globMatch(pattern, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// callableActions are the IAM actions of every method of ec2API and ecrAPI:
// everything the plugin can call, since it holds its clients as those
// interfaces.
func callableActions() []string {
	var out []string
	for prefix, typ := range map[string]reflect.Type{"ec2:": reflect.TypeFor[ec2API](), "ecr:": reflect.TypeFor[ecrAPI]()} {
		for m := range typ.Methods() {
			out = append(out, prefix+m.Name)
		}
	}
	return out
}

// The policy allows exactly what the plugin may call: an action the plugin
// does not need, or one it calls and the policy lacks, fails the test.
func TestIAMPolicyMatchesTheCalls(t *testing.T) {
	allowed := map[string]bool{}
	for _, s := range loadPolicy(t) {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Action {
			allowed[a] = true
		}
	}
	want := append(callableActions(), impliedActions...)
	slices.Sort(want)
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(allowed))); diff != "" {
		t.Errorf("%s allows other actions than the plugin calls (-calls +policy):\n%s", policyPath, diff)
	}
}

// recorder is a middleware recording every operation a client calls.
type recorder struct {
	mu     sync.Mutex
	ops    map[string]bool
	counts map[string]int // calls per operation, when not nil
}

func (r *recorder) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("RecordOperation",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			r.mu.Lock()
			op := awsmiddleware.GetServiceID(ctx) + ":" + awsmiddleware.GetOperationName(ctx)
			r.ops[op] = true
			if r.counts != nil {
				r.counts[op]++
			}
			r.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// Every method of ec2API and ecrAPI is one the plugin really calls: a run
// through every Provider method (and the paths only some configurations
// take) calls each of them, and nothing else. With the test above, the
// policy is exactly what a running plugin needs.
func TestEveryCallableOperationIsCalled(t *testing.T) {
	f := newFakeEC2(t)
	rec := &recorder{ops: map[string]bool{}}
	record := func(p *provider) { p.apiOptions = append(p.apiOptions, rec.middleware) }
	ctx := t.Context()

	p := configured(t, with(testConfig(f), "image", map[string]any{"owner": fakeOwner, "name": "kip-cell-amd64-*"}), record)
	configured(t, with(with(testConfig(f), "subnets", nil), "vpcID", fakeVPC), record)
	if _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); err != nil {
		t.Fatal(err)
	}
	launched, err := p.Launch(ctx, launchRequest("cell-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{launched.Instance.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	f.scheduleEvent(launched.Instance.ID, "system-reboot", f.instance(launched.Instance.ID).launched)
	events := watch(t, p)
	waitEvent(t, events, "maintenance", func(e *pluginapi.Event) bool { return e.Type == pluginapi.EventMaintenance })
	if _, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: fakeOwner + ".dkr.ecr.us-east-1.amazonaws.com/app"}); err != nil {
		t.Fatal(err)
	}
	console, err := p.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: launched.Instance.ID})
	if err != nil || console.Output != fakeConsole || console.Timestamp.IsZero() {
		t.Fatalf("ConsoleOutput = %+v, %v; want the decoded console and its time", console, err)
	}
	vol := f.addVolume(launched.Instance.Zone)
	if _, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: launched.Instance.ID, Driver: VolumeDriver, VolumeHandle: vol}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{launched.Instance.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: launched.Instance.ID, Driver: VolumeDriver, VolumeHandle: vol}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: launched.Instance.ID}); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	var got []string
	for op := range rec.ops {
		svc, name, _ := strings.Cut(op, ":")
		switch svc {
		case "EC2":
			got = append(got, "ec2:"+name)
		case "ECR":
			got = append(got, "ecr:"+name)
		default:
			t.Errorf("called %s of an unexpected service", op)
		}
	}
	rec.mu.Unlock()
	slices.Sort(got)
	want := callableActions()
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations called differ from ec2API and ecrAPI (-interfaces +called):\n%s", diff)
	}
}

// The policy's resources and conditions let through the plugin's real
// calls, with the tags and parameters the plugin sends, and nothing that
// reaches past this cluster: a launch or a tag without this cluster's tag,
// a termination of another cluster's instance, a role other than the
// cells' or one passed to another service.
func TestIAMPolicyScopesTheCalls(t *testing.T) {
	policy := loadPolicy(t)
	f := newFakeEC2(t)
	const profile = "arn:aws:iam::123456789012:instance-profile/kip-cell"
	p := configured(t, with(with(with(testConfig(f), "securityGroups", []string{"sg-0a"}),
		"allowedSecurityGroups", []string{"sg-0b"}), "allowedInstanceProfiles", []string{profile}))
	req := launchRequest("cell-iam")
	req.CapacityType, req.InstanceProfile, req.SecurityGroups = pluginapi.CapacitySpot, profile, []string{"sg-0b"}
	launched, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: launched.Instance.ID}); err != nil {
		t.Fatal(err)
	}

	// RunInstances authorizes every resource it touches, each with the
	// request's tags as aws:RequestTag; CreateTags each tagged resource
	// type, with ec2:CreateAction. All from the request on the wire.
	run := f.requests("RunInstances")[0]
	arn := func(typ, id string) string { return "arn:aws:ec2:us-east-1:123456789012:" + typ + "/" + id }
	requestTags := tagSpecifications(run)
	withTags := func(tags map[string]string, extra ...string) map[string]string {
		ctx := map[string]string{"aws:RequestedRegion": "us-east-1"}
		for k, v := range tags {
			ctx["aws:RequestTag/"+k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			ctx[extra[i]] = extra[i+1]
		}
		return ctx
	}
	type check struct {
		action, resource string
		context          map[string]string
		want             bool
	}
	var checks []check
	resources := []string{
		"arn:aws:ec2:us-east-1::image/" + run.Get("ImageId"),
		arn("subnet", run.Get("NetworkInterface.1.SubnetId")),
		arn("network-interface", "eni-0a"),
		arn("spot-instances-request", "sir-0a"),
	}
	for n := 1; run.Has(fmt.Sprintf("NetworkInterface.1.SecurityGroupId.%d", n)); n++ {
		resources = append(resources, arn("security-group", run.Get(fmt.Sprintf("NetworkInterface.1.SecurityGroupId.%d", n))))
	}
	for _, r := range resources {
		checks = append(checks, check{"ec2:RunInstances", r, withTags(requestTags["instance"]), true})
	}
	for _, typ := range []string{"instance", "volume"} {
		tags := requestTags[typ]
		if tags[pluginapi.TagCluster] != testCluster {
			t.Fatalf("RunInstances tags the %s with %v, without this cluster's tag", typ, tags)
		}
		other := maps.Clone(tags)
		other[pluginapi.TagCluster] = "another-cluster"
		untagged := maps.Clone(tags)
		delete(untagged, pluginapi.TagCluster)
		checks = append(checks,
			check{"ec2:RunInstances", arn(typ, "new"), withTags(tags), true},
			check{"ec2:RunInstances", arn(typ, "new"), withTags(other), false},
			check{"ec2:RunInstances", arn(typ, "new"), withTags(untagged), false},
			check{"ec2:CreateTags", arn(typ, "new"), withTags(tags, "ec2:CreateAction", "RunInstances"), true},
			check{"ec2:CreateTags", arn(typ, "new"), withTags(tags), false},
			check{"ec2:CreateTags", arn(typ, "new"), withTags(other, "ec2:CreateAction", "RunInstances"), false},
		)
	}
	if len(requestTags) != 2 {
		t.Errorf("RunInstances tags resource types %v; the checks above cover instance and volume", slices.Sorted(maps.Keys(requestTags)))
	}

	// TerminateInstances, on the instance as the plugin tagged it.
	term := f.requests("TerminateInstances")[0]
	resourceTags := func(tags map[string]string) map[string]string {
		ctx := map[string]string{"aws:RequestedRegion": "us-east-1"}
		for k, v := range tags {
			ctx["aws:ResourceTag/"+k] = v
		}
		return ctx
	}
	launchedTags := f.instance(term.Get("InstanceId.1")).tags
	checks = append(checks,
		check{"ec2:TerminateInstances", arn("instance", term.Get("InstanceId.1")), resourceTags(launchedTags), true},
		check{"ec2:TerminateInstances", arn("instance", "i-0other"), resourceTags(map[string]string{pluginapi.TagCluster: "another-cluster"}), false},
		check{"ec2:TerminateInstances", arn("instance", "i-0other"), resourceTags(nil), false},
	)

	// AttachVolume and DetachVolume, on this cluster's instances and
	// volumes only: EC2 authorizes both resources, each by its own tags
	// (the volumes carry the cluster's tag, deploy/aws/README.md says how).
	for _, a := range []string{"ec2:AttachVolume", "ec2:DetachVolume"} {
		checks = append(checks,
			check{a, arn("instance", term.Get("InstanceId.1")), resourceTags(launchedTags), true},
			check{a, arn("volume", "vol-0a"), resourceTags(map[string]string{pluginapi.TagCluster: testCluster}), true},
			check{a, arn("volume", "vol-0b"), resourceTags(map[string]string{pluginapi.TagCluster: "another-cluster"}), false},
			check{a, arn("volume", "vol-0c"), resourceTags(nil), false},
			check{a, arn("instance", "i-0other"), resourceTags(map[string]string{pluginapi.TagCluster: "another-cluster"}), false},
		)
	}

	// The Describe calls, in the configured region only; the ECR token and
	// pulls with it.
	region := map[string]string{"aws:RequestedRegion": "us-east-1"}
	for _, a := range callableActions() {
		if strings.HasPrefix(a, "ec2:Describe") {
			checks = append(checks, check{a, "*", region, true}, check{a, "*", map[string]string{"aws:RequestedRegion": "eu-west-1"}, false})
		}
	}
	checks = append(checks, check{"ecr:GetAuthorizationToken", "*", nil, true})
	for _, a := range []string{"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"} {
		checks = append(checks, check{a, "arn:aws:ecr:eu-west-1:210987654321:repository/team/app", nil, true})
	}

	// PassRole: the cells' role, to EC2 only.
	role := "arn:aws:iam::123456789012:role/kip-cell"
	checks = append(checks,
		check{"iam:PassRole", role, map[string]string{"iam:PassedToService": "ec2.amazonaws.com"}, true},
		check{"iam:PassRole", role, map[string]string{"iam:PassedToService": "lambda.amazonaws.com"}, false},
		check{"iam:PassRole", "arn:aws:iam::123456789012:role/admin", map[string]string{"iam:PassedToService": "ec2.amazonaws.com"}, false},
	)

	for _, c := range checks {
		if got := allows(t, policy, c.action, c.resource, c.context); got != c.want {
			t.Errorf("%s on %s with %v: allowed %v, want %v", c.action, c.resource, c.context, got, c.want)
		}
	}
}

// tagSpecifications are the tags of a RunInstances request on the wire,
// by resource type.
func tagSpecifications(run url.Values) map[string]map[string]string {
	requestTags := map[string]map[string]string{} // resource type → tags
	for n := 1; run.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", n)); n++ {
		prefix := fmt.Sprintf("TagSpecification.%d.", n)
		tags := map[string]string{}
		for m := 1; run.Has(fmt.Sprintf("%sTag.%d.Key", prefix, m)); m++ {
			tags[run.Get(fmt.Sprintf("%sTag.%d.Key", prefix, m))] = run.Get(fmt.Sprintf("%sTag.%d.Value", prefix, m))
		}
		requestTags[run.Get(prefix+"ResourceType")] = tags
	}
	return requestTags
}
