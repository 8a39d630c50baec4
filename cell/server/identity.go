package server

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
)

// The files of an Identity, in its directory (0700): the agent's key and
// the certificate the host signed for it, each 0600, and while a renewal
// is under way the new key (NextKeyFile), which becomes KeyFile once its
// certificate is saved.
const (
	KeyFile     = "key.pem"
	CertFile    = "cert.pem"
	NextKeyFile = "key.next.pem"
)

// InstanceIdentity returns the cloud's signed identity of the instance
// the agent runs on (EC2: the instance identity document and its
// signature, from instance metadata), which the agent sends with its join
// request for the host's plugin to check. Nil where there is none.
type InstanceIdentity func(ctx context.Context) (document, signature []byte, err error)

// Identity is the agent's TLS identity and the Join service
// (api.JoinService). The agent makes its key on first
// start and keeps it in its directory; until the host has signed a
// certificate for it (Join, CompleteJoin) the agent is unjoined: it serves
// a self-signed certificate of the key and answers nothing but Join (the
// interceptors of Serve). The certificate is kept beside the key, so an
// agent started again on the same directory serves at once, with no
// token. It is safe for concurrent use.
//
// Once joined, the host renews the certificate over its connection
// (Renew, CompleteRenew): the agent makes a new key, and serves the new
// certificate from the next handshake on, connections open keeping
// theirs. A saved certificate that has expired is still served (an agent
// started again while the host was away): it is how the host recognises
// the cell and renews it (host/pki's CA.Renew); the agent does not judge
// its own certificate's age.
type Identity struct {
	dir      string
	cellID   string
	caPEM    []byte
	token    string
	identity InstanceIdentity
	log      *slog.Logger
	now      func() time.Time

	self tls.Certificate // served until joined
	csr  []byte

	mu      sync.Mutex    // serialises CompleteJoin, Renew and CompleteRenew
	key     crypto.Signer // the key of the certificate served; guarded by mu
	pending crypto.Signer // the key of the last Renew, until CompleteRenew; guarded by mu
	joined  atomic.Pointer[tls.Certificate]
}

var _ api.JoinService = (*Identity)(nil)

// IdentityOption configures LoadIdentity.
type IdentityOption func(*Identity)

// WithClock replaces time.Now for the identity's checks of certificates
// (its own, the host's at each handshake), for tests that move time.
func WithClock(now func() time.Time) IdentityOption {
	return func(id *Identity) {
		if now != nil {
			id.now = now
		}
	}
}

// LoadIdentity returns the identity of the cell b describes, kept in dir:
// the key found there, or a new one saved there, and the certificate
// found there if it is still good for the key, the cell and b's CA.
// identity may be nil. A certificate found there that has expired is
// kept and served (see Identity).
func LoadIdentity(dir string, b *api.Bootstrap, identity InstanceIdentity, log *slog.Logger, opts ...IdentityOption) (*Identity, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating identity directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // G302: a directory, searchable by its owner only
		return nil, fmt.Errorf("restricting identity directory: %w", err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading cell certificate: %w", err)
	}
	if err := finishRenewal(dir, certPEM); err != nil {
		return nil, err
	}
	key, err := loadKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	self, err := api.SelfSigned(key, b.CellID)
	if err != nil {
		return nil, err
	}
	csr, err := api.NewCSR(key, b.CellID)
	if err != nil {
		return nil, err
	}
	id := &Identity{
		dir: dir, cellID: b.CellID, caPEM: []byte(b.CACert), token: b.JoinToken, identity: identity, log: log, now: time.Now,
		key: key, self: self, csr: csr,
	}
	for _, opt := range opts {
		opt(id)
	}
	if certPEM != nil {
		cert, err := api.VerifyCellCertificate(certPEM, id.caPEM, id.cellID, key, id.now())
		var expired *api.ExpiredError
		switch {
		case errors.As(err, &expired):
			// The host renews it when it finds the cell (CA.Renew).
			log.Warn("the saved cell certificate has expired; serving it for the host to renew", "not_after", expired.NotAfter)
			cert, err = api.VerifyCellCertificate(certPEM, id.caPEM, id.cellID, key, expired.NotAfter)
		case err != nil:
			// From another CA, another cell or key: only a new join helps.
			log.Warn("the saved cell certificate is not this cell's; waiting to be joined again", "error", err)
		}
		if err == nil {
			id.joined.Store(cert)
		}
	}
	return id, nil
}

// finishRenewal completes a renewal that an agent stopped in the middle
// of (CompleteRenew): when the saved certificate certPEM is for the new
// key (NextKeyFile), that key becomes KeyFile. A new key whose
// certificate was never saved is left for the next Renew to replace.
func finishRenewal(dir string, certPEM []byte) error {
	next := filepath.Join(dir, NextKeyFile)
	if certPEM == nil {
		return nil
	}
	key, err := readKey(next)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil
	}
	// Otherwise the certificate is the old key's, or unreadable:
	// LoadIdentity judges it.
	if cert, err := x509.ParseCertificate(block.Bytes); err == nil && api.SamePublicKey(cert.PublicKey, key.Public()) {
		if err := os.Rename(next, filepath.Join(dir, KeyFile)); err != nil {
			return fmt.Errorf("finishing the renewal of the cell's key: %w", err)
		}
	}
	return nil
}

// loadKey reads the key at path, or makes one and saves it there first.
func loadKey(path string) (crypto.Signer, error) {
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newKeyFile(path)
	}
	return key, err
}

// newKeyFile makes a new key and saves it at path.
func newKeyFile(path string) (crypto.Signer, error) {
	key, err := api.NewKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding cell key: %w", err)
	}
	if err := writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, fmt.Errorf("saving cell key: %w", err)
	}
	return key, nil
}

// readKey reads the key at path; the error wraps fs.ErrNotExist when
// there is none.
func readKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reading cell key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("reading cell key %s: no PEM block", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing cell key %s: %w", path, err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("parsing cell key %s: a %T cannot sign", path, parsed)
	}
	return key, nil
}

// writeFile writes data to path (0600) through a temporary file, so that
// a crash leaves the old file or the new one.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Joined reports whether the agent holds a certificate the host signed.
func (id *Identity) Joined() bool { return id.joined.Load() != nil }

// Certificate is the certificate the agent serves: the cell's once
// joined, the self-signed one until then.
func (id *Identity) Certificate() (*tls.Certificate, error) {
	if c := id.joined.Load(); c != nil {
		return c, nil
	}
	return &id.self, nil
}

// TLSConfig is the agent's server TLS configuration (api.ServerTLSConfig
// over Certificate): a joined certificate is served from the next
// handshake on, without a restart.
func (id *Identity) TLSConfig() (*tls.Config, error) {
	cfg, err := api.ServerTLSConfig(id.caPEM, id.Certificate)
	if err != nil {
		return nil, err
	}
	cfg.Time = id.now
	return cfg, nil
}

// Join returns the join offer: the bootstrap's token, the certificate
// request for the agent's key and the instance identity where there is
// one. An identity that cannot be read is left out, with a warning in the
// agent's log: a host whose plugin checks identities refuses the join and
// says why on the pod, then asks again; one whose plugin does not joins
// the cell. FailedPrecondition once joined.
func (id *Identity) Join(ctx context.Context) (*api.JoinOffer, error) {
	if id.Joined() {
		return nil, status.Errorf(codes.FailedPrecondition, "cell %s has joined already", id.cellID)
	}
	resp := &api.JoinOffer{Token: id.token, CSR: id.csr}
	if id.identity != nil {
		doc, sig, err := id.identity(ctx)
		if err != nil {
			id.log.WarnContext(ctx, "joining without the instance identity: reading it failed", "error", err)
		} else {
			resp.IdentityDocument, resp.IdentitySignature = doc, sig
		}
	}
	id.log.InfoContext(ctx, "the host asked to join this cell")
	return resp, nil
}

// CompleteJoin checks the certificate the host signed (for this key and
// cell, by the cluster CA), saves it and serves it from the next
// handshake on. Idempotent.
func (id *Identity) CompleteJoin(ctx context.Context, certPEM []byte) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	cert, err := api.VerifyCellCertificate(certPEM, id.caPEM, id.cellID, id.key, id.now())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "refusing the certificate: %v", err)
	}
	if err := writeFile(filepath.Join(id.dir, CertFile), certPEM); err != nil {
		return status.Errorf(codes.Internal, "saving the certificate: %v", err)
	}
	id.joined.Store(cert)
	id.log.InfoContext(ctx, "joined: serving the certificate the host signed", "not_after", cert.Leaf.NotAfter)
	return nil
}

// Renew makes a new key, saved as NextKeyFile, and returns the
// certificate request for it, with the instance identity as Join sends
// it; the agent serves its current certificate until CompleteRenew.
// FailedPrecondition until joined.
func (id *Identity) Renew(ctx context.Context) (*api.JoinOffer, error) {
	if !id.Joined() {
		return nil, id.errNotJoined(api.JoinMethodPrefix + "Renew")
	}
	resp := &api.JoinOffer{}
	if id.identity != nil { // read before the lock: a metadata service may be slow
		doc, sig, err := id.identity(ctx)
		if err != nil {
			id.log.WarnContext(ctx, "renewing without the instance identity: reading it failed", "error", err)
		} else {
			resp.IdentityDocument, resp.IdentitySignature = doc, sig
		}
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	key, err := newKeyFile(filepath.Join(id.dir, NextKeyFile))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "renewing: %v", err)
	}
	if resp.CSR, err = api.NewCSR(key, id.cellID); err != nil {
		return nil, status.Errorf(codes.Internal, "renewing: %v", err)
	}
	id.pending = key
	id.log.InfoContext(ctx, "the host asked to renew this cell's certificate: made a new key")
	return resp, nil
}

// CompleteRenew checks the certificate the host signed for the key of
// the last Renew (by the cluster CA, for this cell), saves it, makes the
// new key the agent's and serves both from the next handshake on.
// Idempotent: the certificate served already is taken again.
func (id *Identity) CompleteRenew(ctx context.Context, certPEM []byte) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if cur := id.joined.Load(); cur != nil && samePEMLeaf(certPEM, cur) {
		return nil
	}
	if id.pending == nil {
		return status.Errorf(codes.FailedPrecondition, "cell %s has no renewal under way: ask Renew first", id.cellID)
	}
	cert, err := api.VerifyCellCertificate(certPEM, id.caPEM, id.cellID, id.pending, id.now())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "refusing the certificate: %v", err)
	}
	// The certificate first: an agent stopped between the two finds it
	// is for the new key and finishes (finishRenewal).
	if err := writeFile(filepath.Join(id.dir, CertFile), certPEM); err != nil {
		return status.Errorf(codes.Internal, "saving the certificate: %v", err)
	}
	if err := os.Rename(filepath.Join(id.dir, NextKeyFile), filepath.Join(id.dir, KeyFile)); err != nil {
		return status.Errorf(codes.Internal, "saving the key: %v", err)
	}
	id.key, id.pending = id.pending, nil
	id.joined.Store(cert)
	id.log.InfoContext(ctx, "renewed: serving the new certificate the host signed", "not_after", cert.Leaf.NotAfter)
	return nil
}

// samePEMLeaf reports whether certPEM's first certificate is cert's leaf.
func samePEMLeaf(certPEM []byte, cert *tls.Certificate) bool {
	block, _ := pem.Decode(certPEM)
	return block != nil && len(cert.Certificate) > 0 && bytes.Equal(block.Bytes, cert.Certificate[0])
}

// errNotJoined is what an unjoined agent answers to anything but Join.
func (id *Identity) errNotJoined(method string) error {
	return status.Errorf(codes.FailedPrecondition, "cell %s has not joined: %s waits for the host to join it", id.cellID, method)
}

// gate lets only the Join service through until the agent has joined.
func (id *Identity) gate(method string) error {
	if id.Joined() || strings.HasPrefix(method, api.JoinMethodPrefix) {
		return nil
	}
	return id.errNotJoined(method)
}

// interceptors are the server options that gate every call (gate).
func (id *Identity) interceptors() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := id.gate(info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := id.gate(info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}
