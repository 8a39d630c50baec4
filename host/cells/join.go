package cells

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/pluginapi"
)

// ReasonCellJoinFailed is the Warning event of a pod whose cell's join
// was refused (a wrong, foreign, expired or spent token, a certificate
// request for another cell or key, an instance identity the plugin
// refused), once per distinct message. The host keeps trying until the
// cell's boot deadline ends it.
const ReasonCellJoinFailed = "CellJoinFailed"

// joinTimeout bounds one join attempt: an agent that is not up yet may
// not even refuse the connection.
const joinTimeout = 30 * time.Second

// joinFunc joins a cell's agent (cellclient.Join); tests replace it.
type joinFunc func(ctx context.Context, cellID, address string, tlsConfig *tls.Config, caPEM []byte, sign cellclient.JoinSigner) (cellclient.Joined, error)

// identityVerifier is the part of the plugin that checks a cell's
// instance identity (capability instance-identity).
type identityVerifier interface {
	VerifyInstanceIdentity(ctx context.Context, req *pluginapi.VerifyInstanceIdentityRequest) (*pluginapi.VerifyInstanceIdentityResponse, error)
}

// identityCheck asks the plugin, where it offers it, whether the identity
// a cell sent with its join request is its instance's.
type identityCheck struct {
	plugin  identityVerifier
	catalog *catalogCache
	log     *slog.Logger
	// notChecked says once why the plugin checks no identity.
	notChecked sync.Once
}

// check returns the plugin's refusal of the identity in req for the
// instance instanceID; nil when the plugin accepts it, does not check
// it, or does not offer the check.
func (ic *identityCheck) check(ctx context.Context, instanceID string, req cellapi.JoinRequest) error {
	if !ic.catalog.hasCapability(ctx, pluginapi.CapabilityInstanceIdentity) {
		ic.notChecked.Do(func() {
			ic.log.InfoContext(ctx, "cells join without an instance identity check: the plugin does not offer one", "capability", pluginapi.CapabilityInstanceIdentity)
		})
		return nil
	}
	resp, err := ic.plugin.VerifyInstanceIdentity(ctx, &pluginapi.VerifyInstanceIdentityRequest{
		InstanceID: instanceID, Document: req.IdentityDocument, Signature: req.IdentitySignature,
	})
	if err != nil {
		return err
	}
	if resp.NotChecked != "" {
		ic.notChecked.Do(func() {
			ic.log.InfoContext(ctx, "cells join without an instance identity check", "reason", resp.NotChecked)
		})
	}
	return nil
}

// join makes sure the cell's agent has joined (joinUntil, the loop a
// standby's join takes too, of joinOnce): the agent is not up before its
// instance has booted, and a refusal is said and tried again, for the
// boot deadline to end a cell that never joins. It reports false when ctx
// ended.
func (c *cell) join(ctx context.Context, inst *pluginapi.Instance) bool {
	return c.d.joinUntil(ctx, func(ctx context.Context) error { return c.joinOnce(ctx, inst) })
}

// joinOnce joins the cell's agent if it has not joined (joinAttempt) and
// renews the certificate of one that joined before and whose certificate
// expired (rejoin). A refusal is logged and recorded on the pod
// (ReasonCellJoinFailed), once per distinct message.
func (c *cell) joinOnce(ctx context.Context, inst *pluginapi.Instance) error {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout) // the renewal's too
	defer cancel()
	got, err := c.d.joinAttempt(ctx, c.id, inst)
	switch {
	case err == nil && got.Now:
		c.log().Info("cell joined: its agent holds a certificate for its own key")
		return nil
	case err == nil && got.Expired:
		// Joined before, and its certificate expired while nobody
		// renewed it (kip was away): renewed if the CA still may.
		return c.rejoin(ctx, inst, got.NotAfter)
	case err == nil:
		return nil
	case errors.Is(err, cellapi.ErrJoinRefused):
		c.mu.Lock()
		repeat := c.joinRefused == err.Error()
		c.joinRefused = err.Error()
		c.mu.Unlock()
		if !repeat {
			c.log().Warn("joining the cell failed", "error", err)
			c.event(corev1.EventTypeWarning, ReasonCellJoinFailed, "%s", err)
		}
	default:
		c.log().Debug("the cell's agent cannot be joined yet", "error", err)
	}
	return err
}

// joinUntil is the join step's loop, for every cell, a pod's and a
// standby's: it calls attempt until it succeeds or ctx ends (then it
// reports false), waiting firstContactBackoff while the agent cannot be
// asked yet (it is starting, and a pod's start waits on it) and
// Config.Backoff after a refusal (cellapi.ErrJoinRefused). It has no
// deadline of its own: the caller's boot deadline ends a join that never
// succeeds.
func (d *cellDeps) joinUntil(ctx context.Context, attempt func(context.Context) error) bool {
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := d.firstContactBackoff(n)
		if errors.Is(err, cellapi.ErrJoinRefused) {
			wait = d.cfg.Backoff(n)
		}
		if !sleep(ctx, wait) {
			return false
		}
	}
}

// joinAttempt is the join step of every cell, a pod's and a standby's:
// one try, within joinTimeout, to make sure the agent of cell cellID on
// inst has joined (cellclient.Join). The host's CA signs the certificate of
// the agent's own key for its join request, after the plugin's check of
// the instance identity the request carries (identityCheck). An agent
// that joined before (by this host, or the one before a restart) and
// serves a certificate valid now is reported to the CA (SawJoined), which
// then refuses the cell's older tokens to any other key; one whose
// certificate expired is the caller's to renew (Joined.Expired). The
// error wraps cellapi.ErrJoinRefused when the CA or the plugin refused;
// any other means the agent could not be asked (not up yet, say).
func (d *cellDeps) joinAttempt(ctx context.Context, cellID string, inst *pluginapi.Instance) (cellclient.Joined, error) {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	tlsConfig, err := d.identity.JoinTLSConfig(cellID)
	if err != nil {
		return cellclient.Joined{}, fmt.Errorf("joining cell %s: %w", cellID, err)
	}
	got, err := d.join(ctx, cellID, inst.PrivateAddress(), tlsConfig, d.identity.CertPEM(),
		func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error) {
			return d.identity.Join(ctx, cellID, req, func(ctx context.Context) error {
				return d.identityCheck.check(ctx, inst.ID, req)
			})
		})
	if err == nil && !got.Now && !got.Expired && got.Key != nil {
		d.identity.SawJoined(cellID, got.Key)
	}
	return got, err
}

// firstContactBackoff is the wait before retry n while a cell's agent is
// still starting: short, as a pod's start-up waits on it.
func (d *cellDeps) firstContactBackoff(n int) time.Duration {
	return min(d.cfg.Backoff(n), 50*time.Millisecond<<min(n-1, 3))
}
