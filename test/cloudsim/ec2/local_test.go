package ec2sim

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
)

// TestLocalCells launches an instance whose cell is a real local cell: the
// kip-plugin-local binary under host/plugin's supervisor, in loopback
// network mode, with /bin/sleep standing in for the cell agent.
func TestLocalCells(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cells, stateDir := localcells.StartForTest(ctx, t, CellTypes(DefaultInstanceTypes), testLogger(t))
	sim, url := startSim(t, Options{Cells: cells})
	c := ec2Client(url)

	const bootstrap = `{"cellID":"cell-local-1"}`
	in := runInput("t3.small", "", "cell-local-1")
	in.UserData = aws.String(mimeUserData(t, "#cloud-config\n", bootstrap))
	in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("kipcell.io/cell"), Value: aws.String("cell-local-1")}}}}
	id := launch(t, c, in)

	w := ec2.NewInstanceRunningWaiter(c, func(o *ec2.InstanceRunningWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	})
	out, err := w.WaitForOutput(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, time.Minute)
	if err != nil {
		t.Fatalf("waiting for running: %v", err)
	}
	ip := aws.ToString(out.Reservations[0].Instances[0].PrivateIpAddress)

	// The address is the one the local plugin gave the cell, which runs.
	localID, cellDir := localcells.CheckCell(ctx, t, cells, stateDir, id, "t3.small", ip, bootstrap)

	// Terminate: the instance ends and the local cell is gone.
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatalf("TerminateInstances: %v", err)
	}
	tw := ec2.NewInstanceTerminatedWaiter(c, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	})
	if err := tw.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, time.Minute); err != nil {
		t.Fatalf("waiting for terminated: %v", err)
	}
	d, err := cells.Client().Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{localID}})
	if err != nil || len(d.Instances) != 0 {
		t.Errorf("local cell after terminate: %+v, %v; want none", d, err)
	}
	if _, err := os.Stat(cellDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cell directory %s still there: %v", cellDir, err)
	}
	if got, _ := sim.Instance(id); got.State != "terminated" || got.PrivateIP != ip {
		t.Errorf("instance after terminate: %s at %q", got.State, got.PrivateIP)
	}
}
