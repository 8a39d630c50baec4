package cells

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/pluginapi"
)

// Event reasons of a cell's certificate (issue 29: a cell lives as long
// as its pod).
const (
	// ReasonCertificateNotRenewed is the Warning event of a pod whose
	// cell's certificate could not be renewed: its agent is older than
	// the renewal, or renewing failed and is tried again. The message
	// says when the certificate expires: after that kip reaches the cell
	// only over a connection made before.
	ReasonCertificateNotRenewed = "CellCertificateNotRenewed"
	// ReasonCertificateExpired is the Warning event of a pod whose cell's
	// certificate expired and could not be renewed (the CA refused: it
	// expired too long ago, or the plugin refused the instance's
	// identity): kip cannot reach the cell, and the pod runs on without
	// it. The host tries again as it would a join.
	ReasonCertificateExpired = "CellCertificateExpired"
	// ReasonCertificateRenewed is the Normal event of a pod whose cell's
	// expired certificate was renewed, once kip found it (a kip that was
	// away longer than the renewal's margin).
	ReasonCertificateRenewed = "CellCertificateRenewed"
)

// ConditionCellReachable is kip's pod condition, False while kip cannot
// reach the pod's cell because the cell's certificate expired and could
// not be renewed (reason ReasonCertificateExpired): the pod's status is
// then the last one the cell reported, and logs, exec and deletion wait
// for the cell. kip owns it (kubeletCondition): it is dropped with the
// next status the cell reports.
const ConditionCellReachable corev1.PodConditionType = "kipcell.io/CellReachable"

// rejoinFunc renews the certificate of a cell's agent that serves an
// expired one (cellclient.Rejoin); tests replace it.
type rejoinFunc func(ctx context.Context, cellID, address string, tlsConfig *tls.Config, sign cellclient.RenewSigner) (cellclient.Renewed, error)

// renewAt is when a cell certificate valid from notBefore to notAfter is
// due for renewal: at two thirds of its life, less jitter (a fraction of
// the life, from 0 to 1, of a sixth of it), so that a cell is renewed
// well before its certificate expires (a third of its life, ten days of
// host/pki's thirty, is the margin for a kip that is away), and cells
// launched together are not all renewed at once.
func renewAt(notBefore, notAfter time.Time, jitter float64) time.Time {
	life := notAfter.Sub(notBefore)
	jitter = min(max(jitter, 0), 1)
	return notBefore.Add(life*2/3 - time.Duration(jitter*float64(life)/6))
}

// renewSigner is the CA's signer of cell c's renewals, with the
// plugin's check of the instance identity the agent sent.
func (c *cell) renewSigner(inst *pluginapi.Instance) cellclient.RenewSigner {
	return func(ctx context.Context, req cellapi.RenewRequest) ([]byte, error) {
		return c.d.identity.Renew(ctx, c.id, req, func(ctx context.Context) error {
			return c.d.identityCheck.check(ctx, inst.ID, cellapi.JoinRequest{
				IdentityDocument: req.IdentityDocument, IdentitySignature: req.IdentitySignature,
			})
		})
	}
}

// rejoin renews the expired certificate the cell's agent serves
// (cellclient.Rejoin), which the CA does within pki.ExpiredRenewalGrace
// (CA.Renew). A refusal is logged and recorded on the pod
// (ReasonCertificateExpired), once per distinct message, as a join's.
func (c *cell) rejoin(ctx context.Context, inst *pluginapi.Instance, notAfter time.Time) error {
	tlsConfig, err := c.d.identity.JoinTLSConfig(c.id)
	if err != nil {
		return err
	}
	got, err := c.d.rejoin(ctx, c.id, inst.PrivateAddress(), tlsConfig, c.renewSigner(inst))
	if err == nil {
		c.setCertificate(got.Certificate)
		c.log().Info("the cell's certificate had expired; renewed it", "expired", notAfter, "not_after", got.Certificate.NotAfter)
		c.event(corev1.EventTypeNormal, ReasonCertificateRenewed,
			"the certificate of cell %s had expired at %s; renewed until %s", c.id, notAfter.UTC().Format(time.RFC3339), got.Certificate.NotAfter.UTC().Format(time.RFC3339))
		return nil
	}
	if errors.Is(err, cellapi.ErrJoinRefused) || errors.Is(err, cellclient.ErrRenewalUnsupported) {
		c.mu.Lock()
		repeat := c.joinRefused == err.Error()
		c.joinRefused = err.Error()
		c.mu.Unlock()
		if !repeat {
			msg := fmt.Sprintf("the certificate of cell %s expired at %s and cannot be renewed, so kip cannot reach the cell; its pod runs on unmanaged: %s",
				c.id, notAfter.UTC().Format(time.RFC3339), err)
			c.log().Error("the cell's certificate expired and cannot be renewed: kip cannot reach the cell", "expired", notAfter, "error", err)
			c.event(corev1.EventTypeWarning, ReasonCertificateExpired, "%s", msg)
			c.unreachable(ReasonCertificateExpired, msg)
		}
		// Refused like a join: the caller backs off as for one.
		if !errors.Is(err, cellapi.ErrJoinRefused) {
			err = errors.Join(err, cellapi.ErrJoinRefused)
		}
		return err
	}
	c.log().Debug("the cell's agent cannot be renewed yet", "error", err)
	return err
}

// unreachable sets the pod's ConditionCellReachable False, for reason.
func (c *cell) unreachable(reason, message string) {
	c.mu.Lock()
	cond := corev1.PodCondition{Type: ConditionCellReachable, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(c.d.cfg.Now())}
	if old := findCondition(c.status.Conditions, ConditionCellReachable); old != nil {
		if old.Status == corev1.ConditionFalse {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		*old = cond
	} else {
		c.status.Conditions = append(c.status.Conditions, cond)
	}
	c.mu.Unlock()
	if c.d.statusChanged != nil {
		c.d.statusChanged(c.uid)
	}
}

// watchCertificate completes tlsConfig (the host's for the cell's agent)
// so that every handshake records the certificate the agent served
// (setCertificate), which renewLoop reads.
func (c *cell) watchCertificate(tlsConfig *tls.Config) {
	verify := tlsConfig.VerifyConnection
	tlsConfig.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) > 0 {
			c.setCertificate(cs.PeerCertificates[0])
		}
		return nil
	}
}

// setCertificate records the newest certificate the cell's agent serves
// and wakes renewLoop.
func (c *cell) setCertificate(cert *x509.Certificate) {
	c.mu.Lock()
	if c.cert == nil || cert.NotAfter.After(c.cert.NotAfter) {
		c.cert = cert
	}
	c.mu.Unlock()
	select {
	case c.certChanged <- struct{}{}:
	default:
	}
}

// renewLoop renews the certificate of the cell's agent over agent, the
// host's connection to it, each time it reaches renewAt (two thirds
// of its life, less a jitter of up to a sixth drawn once per
// certificate), until ctx ends. It looks at the clock at least every
// Config.RenewalCheck, so that a clock that jumps (a host suspended, a
// test) is noticed. A failure is tried again after Config.Backoff; an
// agent too old to renew is reported once (ReasonCertificateNotRenewed)
// and left until its certificate expires. A certificate renewed by a
// kip that ran before this one is found at the next handshake.
func (c *cell) renewLoop(ctx context.Context, agent *cellclient.Agent, inst *pluginapi.Instance) {
	var (
		due      time.Time
		dueFor   *x509.Certificate
		failures int
		reported string
	)
	for {
		c.mu.Lock()
		cert := c.cert
		c.mu.Unlock()
		if cert != nil && cert != dueFor {
			due, dueFor = renewAt(cert.NotBefore, cert.NotAfter, rand.Float64()), cert //nolint:gosec // G404: jitter, not a secret
		}
		now := c.d.cfg.Now()
		if cert == nil || now.Before(due) {
			wait := c.d.cfg.RenewalCheck
			if cert != nil {
				wait = min(wait, due.Sub(now))
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.certChanged:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		got, err := agent.Renew(ctx, c.renewSigner(inst))
		if err == nil {
			failures, reported = 0, ""
			c.setCertificate(got.Certificate)
			c.log().Info("renewed the cell's certificate", "not_after", got.Certificate.NotAfter)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, cellclient.ErrRenewalUnsupported) {
			c.log().Warn("the cell's agent cannot renew its certificate (an older kip-cell): kip cannot reconnect to the cell once it expires", "not_after", cert.NotAfter)
			c.event(corev1.EventTypeWarning, ReasonCertificateNotRenewed,
				"the agent of cell %s cannot renew its certificate (an older kip-cell): after %s kip cannot reconnect to the cell; replace the pod to move it to a current cell",
				c.id, cert.NotAfter.UTC().Format(time.RFC3339))
			// Until the cell serves another certificate (an agent
			// started again, newer).
			for {
				select {
				case <-ctx.Done():
					return
				case <-c.certChanged:
				}
				c.mu.Lock()
				other := c.cert != cert
				c.mu.Unlock()
				if other {
					break
				}
			}
			continue
		}
		failures++
		if err.Error() != reported {
			reported = err.Error()
			c.log().Warn("renewing the cell's certificate failed; trying again", "not_after", cert.NotAfter, "error", err)
			c.event(corev1.EventTypeWarning, ReasonCertificateNotRenewed,
				"renewing the certificate of cell %s, which expires at %s, failed; trying again: %s", c.id, cert.NotAfter.UTC().Format(time.RFC3339), err)
		}
		if !sleep(ctx, c.d.cfg.Backoff(failures)) {
			return
		}
	}
}
