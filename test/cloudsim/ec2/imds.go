package ec2sim

import (
	"cmp"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// The instance metadata service (IMDS) of every simulated instance: an
// HTTP server on a unix socket, which reaches into a cell's network
// namespace where loopback would not. It speaks IMDSv2 as EC2 documents it
// (docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html):
//
//   - PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds
//     (1–21600) returns a token; without the header, or out of range, 400;
//     a PUT carrying X-Forwarded-For is refused with 403.
//   - Every other request is a GET; with X-aws-ec2-metadata-token it must
//     carry a token of this instance that has not expired (401 otherwise);
//     without one it is IMDSv1, refused with 401 when the instance was
//     launched with HttpTokens required.
//   - Paths: /latest/meta-data/ (ami-id, hostname, instance-id,
//     instance-life-cycle, instance-type, local-hostname, local-ipv4,
//     placement/availability-zone, placement/region, spot/instance-action,
//     events/recommendations/rebalance), /latest/user-data and
//     /latest/dynamic/instance-identity/{document,signature}. An unknown path
//     is 404, and so are spot/instance-action and the rebalance
//     recommendation until the instance has one, as in EC2.
//
// The identity document has EC2's fields; its signature (the signature
// path) is a base64-encoded RSA PKCS #1 v1.5 signature over the SHA-256
// of the document, as EC2's, by a key of the simulator whose certificate
// IdentityCertificatePEM returns (EC2's counterpart is the region's AWS
// public certificate).

// Header names and limits of IMDSv2.
const (
	imdsTokenHeader    = "X-aws-ec2-metadata-token" //nolint:gosec // a header's name, not a credential
	imdsTTLHeader      = "X-aws-ec2-metadata-token-ttl-seconds"
	imdsMaxTokenTTL    = 21600
	identityDocVersion = "2017-09-30"
)

// DefaultInterruptionNotice is how long before it is reclaimed a spot
// instance learns of it, as in EC2: two minutes.
const DefaultInterruptionNotice = 2 * time.Minute

// IMDSLocator is implemented by a CellStarter whose cells reach their
// instance metadata at a unix socket of its choosing
// (simcells.IMDSLocator). The server serves an instance's IMDS there;
// without a locator, in a directory of its own (IMDSSocket says where).
type IMDSLocator = simcells.IMDSLocator

// identitySigner is the simulator's instance-identity key, made at first
// use (an RSA key takes a while; most tests never need one).
type identitySigner struct {
	once    sync.Once
	key     *rsa.PrivateKey
	certPEM []byte
	err     error
}

func (g *identitySigner) init() error {
	g.once.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			g.err = fmt.Errorf("making the instance identity key: %w", err)
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1),
			Subject:      pkix.Name{Organization: []string{"ec2sim"}, CommonName: "ec2sim instance identity"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			g.err = fmt.Errorf("making the instance identity certificate: %w", err)
			return
		}
		g.key, g.certPEM = key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return g.err
}

// sign is the signature path's text for doc: base64 of the RSA
// PKCS #1 v1.5 SHA-256 signature, in lines of 76 characters.
func (g *identitySigner) sign(doc []byte) (string, error) {
	if err := g.init(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	sig, err := rsa.SignPKCS1v15(rand.Reader, g.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the identity document: %w", err)
	}
	b64 := base64.StdEncoding.EncodeToString(sig)
	var lines []string
	for len(b64) > 76 {
		lines, b64 = append(lines, b64[:76]), b64[76:]
	}
	return strings.Join(append(lines, b64), "\n"), nil
}

// IdentityCertificatePEM is the certificate (PEM) of the key that signs
// the instances' identity documents: what a plugin verifying them must be
// configured with, as it would be with AWS's public certificate. It
// panics if the key cannot be made (the system has no randomness).
func (s *Server) IdentityCertificatePEM() []byte {
	if err := s.signer.init(); err != nil {
		panic("ec2sim: " + err.Error())
	}
	return slices.Clone(s.signer.certPEM)
}

// IMDSSocket returns the unix socket of an instance's metadata service,
// once it serves (from its launch until its cell has stopped).
func (s *Server) IMDSSocket(instanceID string) (string, bool) { return s.imds.Path(instanceID) }

// startIMDS serves the instance's metadata on its socket: where the
// CellStarter wants it, else in the simulator's directory. A failure is
// logged: the instance runs without metadata, which its cell will say.
// The caller holds s.mu.
func (s *Server) startIMDS(in *instance) {
	if err := s.imds.Serve(in.id, s.cells.IMDSSocket(in.id), s.imdsHandler(in)); err != nil {
		s.log.Error("serving instance metadata failed", "instance", in.id, "cell", in.cellAttr(), "error", err)
	}
}

// imdsHandler answers the metadata requests of one instance.
func (s *Server) imdsHandler(in *instance) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/latest/api/token" {
			s.imdsToken(w, r, in)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			imdsError(w, http.StatusMethodNotAllowed)
			return
		}
		s.mu.Lock()
		body, status := s.imdsGet(r, in)
		s.mu.Unlock()
		if status != http.StatusOK {
			imdsError(w, status)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write([]byte(body)) //nolint:gosec // text/plain metadata of the simulated instance, for its own agent
	})
}

// imdsToken answers PUT /latest/api/token.
func (s *Server) imdsToken(w http.ResponseWriter, r *http.Request, in *instance) {
	if r.Method != http.MethodPut {
		imdsError(w, http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		imdsError(w, http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(imdsTTLHeader))
	if err != nil || ttl < 1 || ttl > imdsMaxTokenTTL {
		imdsError(w, http.StatusBadRequest)
		return
	}
	token := base64.RawURLEncoding.EncodeToString([]byte(randomHex(40)))
	s.mu.Lock()
	if in.imdsTokens == nil {
		in.imdsTokens = map[string]time.Time{}
	}
	now := s.now()
	for t, exp := range in.imdsTokens {
		if !now.Before(exp) {
			delete(in.imdsTokens, t)
		}
	}
	in.imdsTokens[token] = now.Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set(imdsTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(token))
}

// imdsGet is the answer to a GET: its body and status. The caller holds
// s.mu.
func (s *Server) imdsGet(r *http.Request, in *instance) (string, int) {
	now := s.now()
	if token := r.Header.Get(imdsTokenHeader); token != "" {
		if exp, ok := in.imdsTokens[token]; !ok || !now.Before(exp) {
			return "", http.StatusUnauthorized
		}
	} else if in.httpTokens == "required" {
		return "", http.StatusUnauthorized
	}
	s.advance(in, now)
	path := r.URL.Path
	if meta, ok := strings.CutPrefix(path, "/latest/meta-data/"); ok {
		return s.metadata(in, meta)
	}
	switch path {
	case "/latest/user-data":
		if len(in.userData) == 0 {
			return "", http.StatusNotFound
		}
		return string(in.userData), http.StatusOK
	case "/latest/dynamic/instance-identity/document":
		doc, err := s.identityDocument(in)
		if err != nil {
			return "", http.StatusInternalServerError
		}
		return string(doc), http.StatusOK
	case "/latest/dynamic/instance-identity/signature":
		doc, err := s.identityDocument(in)
		if err != nil {
			return "", http.StatusInternalServerError
		}
		sig, err := s.signer.sign(doc)
		if err != nil {
			s.log.Error("signing an identity document", "instance", in.id, "error", err)
			return "", http.StatusInternalServerError
		}
		return sig, http.StatusOK
	}
	return "", http.StatusNotFound
}

// metadata answers a path under /latest/meta-data/. The caller holds s.mu.
func (s *Server) metadata(in *instance, path string) (string, int) {
	lifecycle := "on-demand"
	if in.spot {
		lifecycle = "spot"
	}
	values := map[string]string{
		"ami-id":                      in.imageID,
		"instance-id":                 in.id,
		"instance-type":               in.itype.Name,
		"instance-life-cycle":         lifecycle,
		"local-ipv4":                  in.cell.Address,
		"placement/availability-zone": in.subnet.Zone,
		"placement/region":            s.region.name,
	}
	if in.cell.Address != "" {
		values["hostname"] = privateDNSName(s.region.name, in.cell.Address)
		values["local-hostname"] = values["hostname"]
	}
	if a := in.spotAction; a != nil {
		b, _ := json.Marshal(map[string]string{"action": a.action, "time": a.at.UTC().Format(time.RFC3339)})
		values["spot/instance-action"] = string(b)
	}
	if !in.rebalanceAt.IsZero() {
		b, _ := json.Marshal(map[string]string{"noticeTime": in.rebalanceAt.UTC().Format(time.RFC3339)})
		values["events/recommendations/rebalance"] = string(b)
	}
	switch path {
	case "":
		return "ami-id\nevents/\nhostname\ninstance-id\ninstance-life-cycle\ninstance-type\nlocal-hostname\nlocal-ipv4\nplacement/\nspot/", http.StatusOK
	case "placement/", "placement":
		return "availability-zone\nregion", http.StatusOK
	}
	v, ok := values[path]
	if !ok || v == "" {
		return "", http.StatusNotFound
	}
	return v, http.StatusOK
}

// identityDocument is the instance identity document, with EC2's fields
// in EC2's order. The caller holds s.mu.
func (s *Server) identityDocument(in *instance) ([]byte, error) {
	arch := cmp.Or(in.itype.Arch, "x86_64")
	var privateIP *string
	if in.cell.Address != "" {
		privateIP = &in.cell.Address
	}
	doc := struct {
		AccountID               string   `json:"accountId"`
		Architecture            string   `json:"architecture"`
		AvailabilityZone        string   `json:"availabilityZone"`
		BillingProducts         []string `json:"billingProducts"`
		DevpayProductCodes      []string `json:"devpayProductCodes"`
		MarketplaceProductCodes []string `json:"marketplaceProductCodes"`
		ImageID                 string   `json:"imageId"`
		InstanceID              string   `json:"instanceId"`
		InstanceType            string   `json:"instanceType"`
		KernelID                *string  `json:"kernelId"`
		PendingTime             string   `json:"pendingTime"`
		PrivateIP               *string  `json:"privateIp"`
		RamdiskID               *string  `json:"ramdiskId"`
		Region                  string   `json:"region"`
		Version                 string   `json:"version"`
	}{
		AccountID: s.region.account, Architecture: arch, AvailabilityZone: in.subnet.Zone,
		ImageID: in.imageID, InstanceID: in.id, InstanceType: in.itype.Name,
		PendingTime: in.launchTime.UTC().Format(time.RFC3339), PrivateIP: privateIP,
		Region: s.region.name, Version: identityDocVersion,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the identity document: %w", err)
	}
	return b, nil
}

// imdsError answers an error as the IMDS does: the status and a small
// HTML page naming it.
func imdsError(w http.ResponseWriter, status int) {
	text := fmt.Sprintf("%d - %s", status, http.StatusText(status))
	body := `<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
	"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>` + text + `</title>
 </head>
 <body>
  <h1>` + text + `</h1>
 </body>
</html>
`
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body)) //nolint:gosec // a fixed page naming a status code
}

// spotAction is the spot/instance-action of an instance that has had its
// interruption notice.
type spotAction struct {
	action string
	at     time.Time
}

// NoticeInterruption gives a running (or pending) spot instance EC2's
// two-minute warning, with after in place of the two minutes (zero or
// less: DefaultInterruptionNotice): its metadata's spot/instance-action
// says {"action": "terminate", "time": now+after}, and at that time the
// instance is interrupted (Interrupt: shutting-down, stateReason
// Server.SpotInstanceTermination). It returns the termination time.
func (s *Server) NoticeInterruption(instanceID string, after time.Duration) (time.Time, error) {
	if after <= 0 {
		after = DefaultInterruptionNotice
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil {
		return time.Time{}, fmt.Errorf("noticing the interruption of %s: no such instance", instanceID)
	}
	now := s.now()
	s.advance(in, now)
	switch {
	case !in.spot:
		return time.Time{}, fmt.Errorf("noticing the interruption of %s: not a spot instance", instanceID)
	case in.state != statePending && in.state != stateRunning:
		return time.Time{}, fmt.Errorf("noticing the interruption of %s: instance is %s", instanceID, in.state)
	case in.spotAction != nil:
		return in.spotAction.at, nil
	}
	at := now.Add(after).Truncate(time.Second)
	if at.Before(now) {
		at = at.Add(time.Second)
	}
	in.spotAction = &spotAction{action: "terminate", at: at}
	s.log.Info("spot interruption noticed", "instance", in.id, "cell", in.cellAttr(), "termination", at)
	t := time.AfterFunc(at.Sub(now), func() {
		if err := s.Interrupt(instanceID); err != nil {
			s.log.Info("interruption after the notice not needed", "instance", instanceID, "error", err)
		}
	})
	s.timers = append(s.timers, t)
	return at, nil
}

// RecommendRebalance gives a spot instance EC2's rebalance recommendation:
// its metadata's events/recommendations/rebalance says {"noticeTime": now}.
// Nothing else happens to the instance.
func (s *Server) RecommendRebalance(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil {
		return fmt.Errorf("recommending rebalance of %s: no such instance", instanceID)
	}
	if !in.spot {
		return fmt.Errorf("recommending rebalance of %s: not a spot instance", instanceID)
	}
	if in.rebalanceAt.IsZero() {
		in.rebalanceAt = s.now()
	}
	return nil
}

// closeIMDS stops every instance's metadata service and the pending
// interruptions, and removes the server's socket directory.
func (s *Server) closeIMDS() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
	if err := s.imds.Close(); err != nil {
		return fmt.Errorf("closing the IMDS: %w", err)
	}
	return nil
}
