package pki

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kipcell/kip/cell/api"
)

// ExpiredRenewalGrace is how long after its certificate expired a cell
// may still have it renewed (Renew): as long as a cell certificate lives.
// Past it the host reports the cell (host/cells) instead.
const ExpiredRenewalGrace = DefaultCellValidity

// Renew checks a joined cell's renewal request and signs a certificate
// (SignCell, DefaultCellValidity) for its new key. The evidence is the
// certificate the agent served on the connection the request came over
// (req.Peer): it must be one this CA issued to cellID, and TLS proved the
// agent holds its key. A current one is enough: the host renews cells
// before their certificates expire. One that expired (or is not valid
// yet: a clock moved) is renewed only within ExpiredRenewalGrace after
// its NotAfter and once check, if set, passes (the plugin's instance
// identity check, with the host's look at the plugin's instance of the
// cell). The certificate request must be for cellID alone, as Join's
// (checkCSR). Refusals wrap api.ErrJoinRefused. The new key is recorded
// as the cell's (SawJoined): the cell's older join tokens go to no
// other.
//
// Why an expired certificate may be renewed at all: the host meets the
// agent at the address of the cell's instance, which the plugin lists as
// the cluster's, and the agent proves the key the CA certified for that
// cell; the alternative, a cell that nobody can reach again while its
// pod runs on, is worse. The grace bounds how long a key taken from a
// cell that has stopped being renewed stays good for it.
func (ca *CA) Renew(ctx context.Context, cellID string, req api.RenewRequest, check func(context.Context) error) ([]byte, error) {
	refuse := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("%w: renewing cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	if !api.CertifiedAs(req.Peer, ca.certPEM, cellID) {
		return refuse(errors.New("the agent does not serve a certificate of this CA for the cell"))
	}
	now := ca.now()
	leaf := req.Peer[0]
	if !api.VerifiedAs(req.Peer, ca.certPEM, cellID, now) {
		if late := now.Sub(leaf.NotAfter); late > ExpiredRenewalGrace {
			return refuse(fmt.Errorf("its certificate expired at %s, more than %s ago", leaf.NotAfter.UTC().Format(time.RFC3339), ExpiredRenewalGrace))
		}
		if check != nil {
			if err := check(ctx); err != nil {
				return refuse(err)
			}
		}
	}
	csr, err := parseCSR(req.CSR)
	if err == nil {
		err = checkCSRNames(cellID, csr)
	}
	if err != nil {
		return refuse(err)
	}
	fp, err := keyFingerprint(csr.PublicKey)
	if err != nil {
		return refuse(err)
	}
	certPEM, err := ca.SignCell(cellID, csr.PublicKey, 0)
	if err != nil {
		return nil, fmt.Errorf("renewing cell %s: %w", cellID, err)
	}
	ca.mu.Lock()
	ca.sawJoinedLocked(cellID, fp, now)
	ca.mu.Unlock()
	return certPEM, nil
}
