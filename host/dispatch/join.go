package dispatch

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/cellv1"
)

// JoinSigner checks an agent's join request and returns the certificate
// (PEM) it signed for it; an error wrapping cellapi.ErrJoinRefused is a
// refusal (host/pki's CA.Join, with the plugin's identity check).
type JoinSigner func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error)

// Joined is what Join found.
type Joined struct {
	// Now: Join joined the agent; false: it had joined before.
	Now bool
	// Key is the public key of the agent's certificate.
	Key crypto.PublicKey
}

// Join makes sure the agent of cellID at address (the port is
// cellapi.Port) has joined: one that serves a certificate of the cluster
// CA (caPEM) naming cellID has; one that does not is asked for its join
// request (cell.proto's Join service), which sign checks, and handed the
// certificate. tlsConfig is the host's join configuration (pki.CA's
// JoinTLSConfig): it accepts the agent's self-signed certificate, and
// Join pins it, taking from the call the key the peer proved it holds and
// passing it on as the request's PeerKey. The error wraps
// cellapi.ErrJoinRefused when sign refused; any other means the agent
// could not be asked (not up yet, say): try again. The certificates are
// judged at tlsConfig.Time (pki.CA's clock), else now.
func Join(ctx context.Context, cellID, address string, tlsConfig *tls.Config, caPEM []byte, sign JoinSigner) (Joined, error) {
	return join(ctx, cellID, net.JoinHostPort(address, strconv.Itoa(cellapi.Port)), tlsConfig, caPEM, sign)
}

// join is Join to target (host:port).
func join(ctx context.Context, cellID, target string, tlsConfig *tls.Config, caPEM []byte, sign JoinSigner) (Joined, error) {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		return Joined{}, fmt.Errorf("dialing agent of cell %s at %s to join it: %w", cellID, target, err)
	}
	defer cc.Close()
	c := cellv1.NewJoinClient(cc)
	var p peer.Peer
	resp, err := c.Join(ctx, &cellv1.JoinRequest{}, grpc.Peer(&p))
	chain := peerChain(&p)
	if len(chain) > 0 && cellapi.VerifiedAs(chain, caPEM, cellID, clock(tlsConfig)()) {
		return Joined{Key: chain[0].PublicKey}, nil // joined before
	}
	if err != nil {
		return Joined{}, fmt.Errorf("asking cell %s to join: %w", cellID, err)
	}
	if len(chain) == 0 {
		return Joined{}, fmt.Errorf("asking cell %s to join: no peer certificate", cellID)
	}
	pinned := chain[0].PublicKey
	certPEM, err := sign(ctx, cellapi.JoinRequest{
		Token: resp.GetToken(), CSR: resp.GetCsr(), PeerKey: pinned,
		IdentityDocument: resp.GetIdentityDocument(), IdentitySignature: resp.GetIdentitySignature(),
	})
	if err != nil {
		return Joined{}, fmt.Errorf("joining cell %s: %w", cellID, err)
	}
	var p2 peer.Peer
	_, err = c.CompleteJoin(ctx, &cellv1.CompleteJoinRequest{Certificate: certPEM}, grpc.Peer(&p2))
	if chain := peerChain(&p2); len(chain) == 0 || !cellapi.SamePublicKey(chain[0].PublicKey, pinned) {
		// The connection broke and another agent answered: it does not
		// hold the key the certificate is for, so it is useless to it.
		return Joined{}, errors.Join(fmt.Errorf("joining cell %s: the agent's key changed during the join", cellID), err)
	}
	if err != nil {
		return Joined{}, fmt.Errorf("handing cell %s its certificate: %w", cellID, err)
	}
	return Joined{Now: true, Key: pinned}, nil
}

// clock is tlsConfig's Time, else time.Now.
func clock(tlsConfig *tls.Config) func() time.Time {
	if tlsConfig != nil && tlsConfig.Time != nil {
		return tlsConfig.Time
	}
	return time.Now
}

// HandshakeFailed reports whether err is a call's failure to set up TLS
// with the agent: among others, an agent that serves a certificate the
// host does not accept, as an unjoined one does (try Join).
func HandshakeFailed(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "authentication handshake failed")
}

// peerChain is the certificate chain p presented over TLS, if any.
func peerChain(p *peer.Peer) []*x509.Certificate {
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return info.State.PeerCertificates
}
