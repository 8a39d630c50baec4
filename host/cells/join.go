package cells

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/dispatch"
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

// joinFunc joins a cell's agent (dispatch.Join); tests replace it.
type joinFunc func(ctx context.Context, cellID, address string, tlsConfig *tls.Config, caPEM []byte, sign dispatch.JoinSigner) (dispatch.Joined, error)

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

// join makes sure the cell's agent has joined, trying until it has or ctx
// ends: the agent is not up before its instance has booted, and a refusal
// is said (joinOnce) and tried again, for the boot deadline to end a cell
// that never joins. It reports false when ctx ended.
func (c *cell) join(ctx context.Context, inst *pluginapi.Instance) bool {
	for n := 1; ; n++ {
		err := c.joinOnce(ctx, inst)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := c.firstContactBackoff(n)
		if errors.Is(err, cellapi.ErrJoinRefused) {
			wait = c.d.cfg.Backoff(n)
		}
		if !sleep(ctx, wait) {
			return false
		}
	}
}

// joinOnce joins the cell's agent if it has not joined (dispatch.Join):
// the host's CA checks the join request and the plugin the instance
// identity. One that has joined (before a restart of the host, say) is
// reported to the CA (SawJoined), which then refuses the cell's older
// tokens to any other key. A refusal is logged and recorded on the pod
// (ReasonCellJoinFailed), once per distinct message.
func (c *cell) joinOnce(ctx context.Context, inst *pluginapi.Instance) error {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	tlsConfig, err := c.d.identity.JoinTLSConfig(c.id)
	if err != nil {
		return err
	}
	got, err := c.d.join(ctx, c.id, inst.PrivateAddress(), tlsConfig, c.d.identity.CertPEM(),
		func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error) {
			return c.d.identity.Join(ctx, c.id, req, func(ctx context.Context) error {
				return c.d.identityCheck.check(ctx, inst.ID, req)
			})
		})
	switch {
	case err == nil && got.Now:
		c.log().Info("cell joined: its agent holds a certificate for its own key")
		return nil
	case err == nil && got.Expired:
		// Joined before, and its certificate expired while nobody
		// renewed it (kip was away): renewed if the CA still may.
		return c.rejoin(ctx, inst, got.NotAfter)
	case err == nil:
		// Joined before (by this host, or the one before a restart):
		// no token of the cell issued before may join another key.
		if got.Key != nil {
			c.d.identity.SawJoined(c.id, got.Key)
		}
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
