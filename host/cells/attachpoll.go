package cells

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Polling a disk's attachment (attachAndWait) and detachment
// (detachDisks): the first look after pollFirst, doubling up to pollMax.
//
//   - The first look is soon because some attach at once: the local
//     plugin's loop device is attached within the AttachVolume call
//     (about 15 ms), a simulator's within tens of milliseconds; a first
//     wait of 100 ms was most of such an attach.
//   - The cap is 2 s because the clouds take seconds: an EBS volume
//     attaching is "attaching" for a few seconds (the EBS CSI driver
//     polls DescribeVolumes from 1 s), a Compute Engine attachDisk is a
//     zonal operation of a few seconds, an Azure data disk PATCH a
//     long-running operation of ten seconds or more.
//   - What it costs: one DescribeVolumeAttachments per instance per
//     round, whatever the number of disks (attachPoller), so an instance
//     costs 5 reads within the first 0.6 s and then at most one every 2 s.
//     The plugins' read buckets hold 20 calls and refill 10 a second
//     (plugins' rateLimit defaults), EC2's non-mutating bucket 100 and 20
//     a second (EC2 API request throttling); 20 instances attaching at
//     once stay within them once past their first second.
const (
	pollFirst = 20 * time.Millisecond
	pollMax   = 2 * time.Second
)

// pollDelay is the wait before look n (1 first).
func pollDelay(n int) time.Duration {
	return min(pollFirst<<min(n-1, 7), pollMax)
}

// attachPoller describes one instance's attachments for every disk
// waiting on it: one DescribeVolumeAttachments a round, whatever the
// number of disks. Its rounds follow pollDelay from the first waiter on,
// and start again from pollFirst once nobody waited. It runs (run) for
// as long as its cell attaches disks (attachDisks).
type attachPoller struct {
	instanceID string
	plugin     volumeAPI
	wake       chan struct{} // a waiter came while no round was due

	mu sync.Mutex
	// next is the round the waiters wait for: nil while nobody waits.
	next *pollRound
}

// pollRound is one Describe: its answer, given to every waiter once done
// is closed.
type pollRound struct {
	done    chan struct{}
	waiters int
	resp    *pluginapi.DescribeVolumeAttachmentsResponse
	err     error
}

func newAttachPoller(plugin volumeAPI, instanceID string) *attachPoller {
	return &attachPoller{instanceID: instanceID, plugin: plugin, wake: make(chan struct{}, 1)}
}

// run makes the rounds until ctx ends.
func (p *attachPoller) run(ctx context.Context) {
	n := 0
	for {
		p.mu.Lock()
		waiting := p.next != nil
		p.mu.Unlock()
		if !waiting {
			n = 0
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		n++
		if !sleep(ctx, pollDelay(n)) {
			return
		}
		p.mu.Lock()
		r := p.next
		p.next = nil
		p.mu.Unlock()
		if r == nil {
			continue // every waiter left
		}
		r.resp, r.err = p.plugin.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{p.instanceID}})
		if r.err != nil {
			r.err = fmt.Errorf("describing the attachments of %s: %w", p.instanceID, r.err)
		}
		close(r.done)
	}
}

// wait returns the answer of the next round, or ctx's error.
func (p *attachPoller) wait(ctx context.Context) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	p.mu.Lock()
	r := p.next
	if r == nil {
		r = &pollRound{done: make(chan struct{})}
		p.next = r
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	r.waiters++
	p.mu.Unlock()
	select {
	case <-r.done:
		return r.resp, r.err
	case <-ctx.Done():
		p.mu.Lock()
		if r.waiters--; r.waiters == 0 && p.next == r {
			p.next = nil
		}
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}
