package aws

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"reflect"
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
// iam:PassRole for the profile's role.
var impliedActions = []string{"ec2:CreateTags", "iam:PassRole"}

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
	data, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Version   string
		Statement []struct {
			Effect string
			Action json.RawMessage
		}
	}
	if err := json.Unmarshal(data, &policy); err != nil {
		t.Fatalf("%s: %v", policyPath, err)
	}
	if policy.Version != "2012-10-17" {
		t.Errorf("policy version %q, want 2012-10-17", policy.Version)
	}
	allowed := map[string]bool{}
	for _, s := range policy.Statement {
		if s.Effect != "Allow" {
			continue
		}
		var actions []string
		if err := json.Unmarshal(s.Action, &actions); err != nil {
			var one string
			if err := json.Unmarshal(s.Action, &one); err != nil {
				t.Fatalf("statement action %s is neither a string nor a list", s.Action)
			}
			actions = []string{one}
		}
		for _, a := range actions {
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
	mu  sync.Mutex
	ops map[string]bool
}

func (r *recorder) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("RecordOperation",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			r.mu.Lock()
			r.ops[awsmiddleware.GetServiceID(ctx)+":"+awsmiddleware.GetOperationName(ctx)] = true
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
