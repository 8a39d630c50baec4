package match

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

func TestOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, OutcomePlaced},
		{&UnsatisfiableError{Reason: "no type has 512 vCPUs"}, OutcomeUnsatisfiable},
		{fmt.Errorf("ranking: %w", &UnsatisfiableError{Reason: "x"}), OutcomeUnsatisfiable},
		{errors.New("listing instance types: unreachable"), OutcomeError},
	}
	for _, tt := range tests {
		if got := Outcome(tt.err); got != tt.want {
			t.Errorf("Outcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestFellBack(t *testing.T) {
	spotFirst := Requirements{CapacityTypes: []pluginapi.CapacityType{pluginapi.CapacitySpot, pluginapi.CapacityOnDemand}}
	onDemand := Requirements{CapacityTypes: []pluginapi.CapacityType{pluginapi.CapacityOnDemand}}
	tests := []struct {
		name  string
		req   Requirements
		cands []Candidate
		want  bool
	}{
		{"spot placed on spot", spotFirst, []Candidate{{CapacityType: pluginapi.CapacitySpot}, {CapacityType: pluginapi.CapacityOnDemand}}, false},
		{"spot placed on on-demand", spotFirst, []Candidate{{CapacityType: pluginapi.CapacityOnDemand}}, true},
		{"on-demand on on-demand", onDemand, []Candidate{{CapacityType: pluginapi.CapacityOnDemand}}, false},
		{"no candidate", spotFirst, nil, false},
		{"no capacity type asked", Requirements{}, []Candidate{{CapacityType: pluginapi.CapacitySpot}}, false},
	}
	for _, tt := range tests {
		if got := FellBack(tt.req, tt.cands); got != tt.want {
			t.Errorf("%s: FellBack = %v, want %v", tt.name, got, tt.want)
		}
	}
}
