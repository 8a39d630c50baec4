package cellclient

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
	// Expired: the agent had joined, and serves a certificate of the
	// cluster CA for the cell that is not valid now (it expired while
	// nobody renewed it): Rejoin renews it, if the CA still may.
	// NotAfter is when it expired.
	Expired  bool
	NotAfter time.Time
}

// Join makes sure the agent of cellID at address (the port is
// cellapi.Port) has joined: one that serves a certificate of the cluster
// CA (caPEM) naming cellID has; one that does not is asked for its join
// request (cellapi.JoinService's Join), which sign checks, and handed the
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
	c := cellapi.NewJoinClient(cc)
	var p peer.Peer
	offer, err := c.Join(ctx, grpc.Peer(&p))
	chain := peerChain(&p)
	if len(chain) > 0 && cellapi.VerifiedAs(chain, caPEM, cellID, clock(tlsConfig)()) {
		return Joined{Key: chain[0].PublicKey}, nil // joined before
	}
	if cellapi.CertifiedAs(chain, caPEM, cellID) && status.Code(err) == codes.FailedPrecondition {
		return Joined{Key: chain[0].PublicKey, Expired: true, NotAfter: chain[0].NotAfter}, nil
	}
	if err != nil {
		return Joined{}, fmt.Errorf("asking cell %s to join: %w", cellID, err)
	}
	if len(chain) == 0 {
		return Joined{}, fmt.Errorf("asking cell %s to join: no peer certificate", cellID)
	}
	pinned := chain[0].PublicKey
	certPEM, err := sign(ctx, cellapi.JoinRequest{
		Token: offer.Token, CSR: offer.CSR, PeerKey: pinned,
		IdentityDocument: offer.IdentityDocument, IdentitySignature: offer.IdentitySignature,
	})
	if err != nil {
		return Joined{}, fmt.Errorf("joining cell %s: %w", cellID, err)
	}
	var p2 peer.Peer
	err = c.CompleteJoin(ctx, certPEM, grpc.Peer(&p2))
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

// RenewSigner checks an agent's renewal request and returns the
// certificate (PEM) it signed for the agent's new key; an error wrapping
// cellapi.ErrJoinRefused is a refusal (host/pki's CA.Renew).
type RenewSigner func(ctx context.Context, req cellapi.RenewRequest) ([]byte, error)

// Renewed is what a renewal gave the agent.
type Renewed struct {
	// Certificate is the agent's new certificate, which it serves from
	// its next handshake on.
	Certificate *x509.Certificate
}

// ErrRenewalUnsupported is wrapped by Renew's and Rejoin's error when
// the agent does not renew (a kip-cell older than the renewal): its
// certificate lasts until it expires.
var ErrRenewalUnsupported = errors.New("the cell's agent cannot renew its certificate")

// Renew renews the agent's certificate over this connection (cellapi's
// Renew): the agent makes a new key and sends a request for it, sign
// checks it against the certificate the agent served on the connection
// and signs it, and the agent takes the certificate. The connection and
// its streams go on; the agent serves the new certificate from its next
// handshake on. The error wraps ErrRenewalUnsupported for an older
// agent and cellapi.ErrJoinRefused for a refusal.
func (a *Agent) Renew(ctx context.Context, sign RenewSigner) (Renewed, error) {
	return renew(ctx, a.cellID, cellapi.NewJoinClient(a.cc), sign)
}

// Rejoin renews the certificate of an agent that serves an expired one
// (Join's Joined.Expired), over a connection of its own with tlsConfig,
// the host's join configuration (pki.CA's JoinTLSConfig, which accepts
// any certificate): the CA (sign) decides from the certificate the agent
// proved it holds. See Renew.
func Rejoin(ctx context.Context, cellID, address string, tlsConfig *tls.Config, sign RenewSigner) (Renewed, error) {
	return rejoin(ctx, cellID, net.JoinHostPort(address, strconv.Itoa(cellapi.Port)), tlsConfig, sign)
}

// rejoin is Rejoin to target (host:port).
func rejoin(ctx context.Context, cellID, target string, tlsConfig *tls.Config, sign RenewSigner) (Renewed, error) {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		return Renewed{}, fmt.Errorf("dialing agent of cell %s at %s to renew it: %w", cellID, target, err)
	}
	defer cc.Close()
	return renew(ctx, cellID, cellapi.NewJoinClient(cc), sign)
}

// renew is Renew over c.
func renew(ctx context.Context, cellID string, c *cellapi.JoinClient, sign RenewSigner) (Renewed, error) {
	var p peer.Peer
	offer, err := c.Renew(ctx, grpc.Peer(&p))
	if status.Code(err) == codes.Unimplemented {
		return Renewed{}, fmt.Errorf("renewing cell %s: %w: %w", cellID, ErrRenewalUnsupported, err)
	}
	if err != nil {
		return Renewed{}, fmt.Errorf("asking cell %s to renew: %w", cellID, err)
	}
	chain := peerChain(&p)
	certPEM, err := sign(ctx, cellapi.RenewRequest{
		CSR: offer.CSR, Peer: chain,
		IdentityDocument: offer.IdentityDocument, IdentitySignature: offer.IdentitySignature,
	})
	if err != nil {
		return Renewed{}, fmt.Errorf("renewing cell %s: %w", cellID, err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return Renewed{}, fmt.Errorf("renewing cell %s: the signer returned no certificate", cellID)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return Renewed{}, fmt.Errorf("renewing cell %s: %w", cellID, err)
	}
	if err := c.CompleteRenew(ctx, certPEM); err != nil {
		return Renewed{}, fmt.Errorf("handing cell %s its renewed certificate: %w", cellID, err)
	}
	return Renewed{Certificate: cert}, nil
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
