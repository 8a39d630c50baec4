package ec2sim

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

// consoleText is an instance's console output, decoded.
func consoleText(t *testing.T, c *ec2.Client, id string) string {
	t.Helper()
	out, err := c.GetConsoleOutput(t.Context(), &ec2.GetConsoleOutputInput{InstanceId: aws.String(id)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.InstanceId) != id {
		t.Errorf("GetConsoleOutput answered instance %q, want %s", aws.ToString(out.InstanceId), id)
	}
	text, err := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
	if err != nil {
		t.Fatalf("console output is not base64: %v", err)
	}
	return string(text)
}

// An instance runs before its agent starts, the agent starts AgentDelay
// after, and a silenced instance runs and never starts it; the console
// says which.
func TestAgentStartsAfterRunningOrNever(t *testing.T) {
	cells := cellstest.NewAgentCells()
	clock := newClock()
	sim, url := startSim(t, Options{Cells: cells, Now: clock.Now, BootDelay: time.Minute, AgentDelay: 2 * time.Minute})
	c := ec2Client(url, noRetries)

	sim.SilenceAgents(1)
	silent := launch(t, c, runInput("t3.micro", "", ""))
	normal := launch(t, c, runInput("t3.micro", "", ""))
	eventually(t, "both cells started", func() bool { return cells.IsStarted(silent) && cells.IsStarted(normal) })
	if text := consoleText(t, c, normal); text != "" {
		t.Errorf("console of a pending instance = %q, want none", text)
	}

	clock.Advance(time.Minute)
	for _, id := range []string{silent, normal} {
		if s := stateName(describe(t, c, id)); s != "running" {
			t.Errorf("%s is %s after the boot delay, want running", id, s)
		}
	}
	if cells.AgentStarted(normal) {
		t.Error("the agent started with the instance, want AgentDelay after")
	}
	if text := consoleText(t, c, normal); !strings.Contains(text, "Cloud-init v. 22.4.2 running") || strings.Contains(text, "Started kip-cell") {
		t.Errorf("console before the agent:\n%s", text)
	}

	clock.Advance(2 * time.Minute)
	// Times are read from the injected clock: a look at the instance
	// starts its agent once due.
	eventually(t, "the agent started", func() bool { describe(t, c, normal); return cells.AgentStarted(normal) })
	if text := consoleText(t, c, normal); !strings.Contains(text, "Started kip-cell.service") {
		t.Errorf("console once the agent started:\n%s", text)
	}
	describe(t, c, silent)
	time.Sleep(50 * time.Millisecond) // a silenced agent that started would have by now
	if cells.AgentStarted(silent) {
		t.Error("the silenced instance's agent started")
	}
	if text := consoleText(t, c, silent); !strings.Contains(text, "Failed to start kip-cell.service") {
		t.Errorf("console of the silenced instance:\n%s", text)
	}
	if _, err := c.GetConsoleOutput(t.Context(), &ec2.GetConsoleOutputInput{InstanceId: aws.String("i-0123456789abcdef0")}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("console of an unknown instance: %v, want InvalidInstanceID.NotFound", err)
	}
}
