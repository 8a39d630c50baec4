package choices

import (
	"slices"
	"strings"
	"testing"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/setting"
)

// team is the rules of the tests: team-* namespaces may choose from a list,
// the builder ServiceAccount of ci more, everyone else nothing but spot.
var team = Config{Rules: []Rule{
	{
		Name: "ci-builder", Namespaces: []string{"ci"}, ServiceAccounts: []string{"builder"},
		InstanceTypes: []string{"*"}, CapacityTypes: []string{"*"}, GPUKinds: []string{"*"},
		InstanceProfiles: []string{"*"}, SecurityGroups: []string{"*"}, MaxVolumeSize: "1Ti",
	},
	{
		Name: "teams", Namespaces: []string{"team-*"},
		InstanceTypes: []string{"c5.*", "m5.large"}, CapacityTypes: []string{"spot"}, GPUKinds: []string{"t4"},
		InstanceProfiles: []string{"team-role"}, SecurityGroups: []string{"sg-team*"}, MaxVolumeSize: "100Gi",
		MaxPriceRatio: 2,
	},
	{Name: "everyone", CapacityTypes: []string{"spot"}},
}}

func named(patterns ...string) []match.NamePattern {
	var out []match.NamePattern
	for _, p := range patterns {
		out = append(out, match.NamePattern{Pattern: p, Source: "annotation kipcell.io/instance-type"})
	}
	return out
}

func TestCheck(t *testing.T) {
	only := Config{Rules: []Rule{{Name: "only-ml", Namespaces: []string{"ml"}, InstanceTypes: []string{"*"}}}}
	tests := []struct {
		name string
		cfg  Config
		pod  Pod
		want string // a part of the error; "" for none
	}{
		{"no rules: anything", Config{}, Pod{Namespace: "x", InstanceTypes: named("p4d.24xlarge"), InstanceProfile: "admin", VolumeSizeGiB: 9000}, ""},
		{"nothing chosen", team, Pod{Namespace: "web"}, ""},
		{"no matching rule: nothing", only, Pod{Namespace: "web", InstanceTypes: named("c5.large")},
			`annotation kipcell.io/instance-type asks for instance type "c5.large": no rule of kip's cells.choices is for namespace "web"`},
		{"instance type with an empty list", team, Pod{Namespace: "web", InstanceTypes: named("c5.large")},
			`rule "everyone" of kip's cells.choices (for namespace "web") allows none (instanceTypes)`},
		{"instance type in a list is Bound's", team, Pod{Namespace: "team-a", InstanceTypes: named("r5.large")}, ""},
		{"capacity type allowed", team, Pod{Namespace: "web", CapacityType: "spot", CapacityTypeSource: "annotation kipcell.io/capacity-type"}, ""},
		{"capacity type refused", team, Pod{Namespace: "web", CapacityType: "on-demand", CapacityTypeSource: "nodeSelector kipcell.io/capacity-type"},
			`nodeSelector kipcell.io/capacity-type asks for capacity type on-demand: rule "everyone" of kip's cells.choices (for namespace "web") allows spot (capacityTypes)`},
		{"GPU kind refused", team, Pod{Namespace: "team-a", GPUKind: "a100", GPUKindSource: "annotation kipcell.io/gpu-kind"},
			`annotation kipcell.io/gpu-kind asks for GPU kind "a100": rule "teams"`},
		{"GPU kind allowed", team, Pod{Namespace: "team-a", GPUKind: "t4"}, ""},
		{"instance profile refused", team, Pod{Namespace: "team-a", InstanceProfile: "admin"},
			`instance profile "admin": rule "teams" of kip's cells.choices (for namespace "team-a") allows team-role (instanceProfiles)`},
		{"instance profile of the ServiceAccount's rule", team, Pod{Namespace: "ci", ServiceAccount: "builder", InstanceProfile: "admin"}, ""},
		{"another ServiceAccount of that namespace", team, Pod{Namespace: "ci", InstanceProfile: "admin"},
			`rule "everyone" of kip's cells.choices (for namespace "ci") allows none (instanceProfiles)`},
		{"security group refused", team, Pod{Namespace: "team-a", SecurityGroups: []string{"sg-team1", "sg-admin"}},
			`adds security group "sg-admin": rule "teams"`},
		{"security groups allowed", team, Pod{Namespace: "team-a", SecurityGroups: []string{"sg-team1", "sg-team2"}}, ""},
		{"volume too big", team, Pod{Namespace: "team-a", VolumeSizeGiB: 101},
			`root volume of 101Gi: rule "teams" of kip's cells.choices (for namespace "team-a") allows at most 100Gi (maxVolumeSize)`},
		{"volume at the bound", team, Pod{Namespace: "team-a", VolumeSizeGiB: 100}, ""},
		{"volume without a bound", team, Pod{Namespace: "web", VolumeSizeGiB: 10}, `allows none (maxVolumeSize)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Check(tt.pod)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check: %v, want an error containing %q", err, tt.want)
			case tt.want != "" && !IsForbidden(err):
				t.Errorf("Check: %T, want a *ForbiddenError", err)
			}
		})
	}
}

func TestBound(t *testing.T) {
	cand := func(typ string, price float64, known bool, mcpu, gib int64) match.Candidate {
		return match.Candidate{InstanceType: typ, HourlyPrice: price, PriceKnown: known, MilliCPU: mcpu, MemoryBytes: gib << 30}
	}
	cheapest := cand("c5.large", 0.085, true, 2000, 4)
	ranked := []match.Candidate{
		cand("c5.large", 0.085, true, 2000, 4), cand("c5.xlarge", 0.17, true, 4000, 8),
		cand("c5.2xlarge", 0.34, true, 8000, 16), cand("r5.large", 0.126, true, 2000, 16),
	}
	tests := []struct {
		name     string
		pod      Pod
		cands    []match.Candidate
		cheapest match.Candidate
		want     []string // instance types left
		err      string
	}{
		{"no instance type named: unbounded", Pod{Namespace: "team-a"}, ranked, cheapest,
			[]string{"c5.large", "c5.xlarge", "c5.2xlarge", "r5.large"}, ""},
		{"the rule's types, within twice the price", Pod{Namespace: "team-a", InstanceTypes: named("*")}, ranked, cheapest,
			[]string{"c5.large", "c5.xlarge"}, ""},
		{"above the ceiling", Pod{Namespace: "team-a", InstanceTypes: named("c5.2xlarge")}, ranked[2:3], cheapest, nil,
			`annotation kipcell.io/instance-type asks for instance type "c5.2xlarge": rule "teams" of kip's cells.choices (for namespace "team-a") allows at most 2× the hourly price of c5.large ($0.0850)`},
		{"a type the rule does not list", Pod{Namespace: "team-a", InstanceTypes: named("r5.large")}, ranked[3:], cheapest, nil,
			`allows c5.*, m5.large (instanceTypes)`},
		{"no ceiling", Pod{Namespace: "ci", ServiceAccount: "builder", InstanceTypes: named("c5.2xlarge")}, ranked[2:3], cheapest,
			[]string{"c5.2xlarge"}, ""},
		{"unknown prices: the size", Pod{Namespace: "team-a", InstanceTypes: named("c5.*")},
			[]match.Candidate{cand("c5.xlarge", 0, false, 4000, 8), cand("c5.2xlarge", 0, false, 8000, 16)}, cand("c5.large", 0, false, 2000, 4),
			[]string{"c5.xlarge"}, ""},
		{"unknown prices, too big", Pod{Namespace: "team-a", InstanceTypes: named("c5.2xlarge")},
			[]match.Candidate{cand("c5.2xlarge", 0, false, 8000, 16)}, cand("c5.large", 0, false, 2000, 4), nil,
			`at most 2× the vCPUs and memory of c5.large`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := team.Bound(tt.pod, tt.cands, tt.cheapest)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !IsForbidden(err) {
					t.Fatalf("Bound: %v, want a *ForbiddenError containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Bound: %v", err)
			}
			var types []string
			for _, c := range got {
				types = append(types, c.InstanceType)
			}
			if !slices.Equal(types, tt.want) {
				t.Errorf("Bound left %v, want %v", types, tt.want)
			}
		})
	}
	if team.Ceiling(Pod{Namespace: "team-a"}) != 0 || team.Ceiling(Pod{Namespace: "team-a", InstanceTypes: named("c5.large")}) != 2 {
		t.Error("Ceiling: want 0 for a pod that names no instance type, the rule's ratio for one that does")
	}
}

func TestValidate(t *testing.T) {
	bad := Config{Rules: []Rule{
		{Name: ""},
		{Name: "Bad_Name"},
		{Name: "twice"}, {Name: "twice"},
		{Name: "globs", Namespaces: []string{"[a-"}, InstanceTypes: []string{""}},
		{Name: "values", CapacityTypes: []string{"cheap"}, MaxVolumeSize: "lots", MaxPriceRatio: 0.5},
	}}
	want := []string{
		"choices.rules[0].name", "choices.rules[1].name", "choices.rules[3].name",
		"choices.rules[4].namespaces", "choices.rules[4].instanceTypes",
		"choices.rules[5].capacityTypes", "choices.rules[5].maxVolumeSize", "choices.rules[5].maxPriceRatio",
	}
	var keys []string
	for _, err := range bad.Validate("choices") {
		keys = append(keys, setting.Keys(err)...)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("Validate named %v, want %v", keys, want)
	}
	if errs := team.Validate("choices"); len(errs) != 0 {
		t.Errorf("Validate of good rules: %v", errs)
	}
}
