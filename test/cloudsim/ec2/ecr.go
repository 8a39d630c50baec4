package ec2sim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ECR's JSON 1.1 service name and the one operation served.
const (
	ecrTargetPrefix          = "AmazonEC2ContainerRegistry_V20150921."
	ecrGetAuthorizationToken = "GetAuthorizationToken"
	ecrTokenLifetime         = 12 * time.Hour
	ecrUser                  = "AWS"
)

// ECRCredentials are the user name and password every ECR authorization
// token of this server encodes.
func (s *Server) ECRCredentials() (user, password string) {
	return ecrUser, s.opts.ECRPassword
}

// ECRRegistry is the registry host of the server's account and region,
// <account>.dkr.ecr.<region>.amazonaws.com.
func (s *Server) ECRRegistry() string {
	return fmt.Sprintf("%s.dkr.ecr.%s.amazonaws.com", s.opts.AccountID, s.opts.Region)
}

type ecrAuthorizationData struct {
	AuthorizationToken string  `json:"authorizationToken"`
	ExpiresAt          float64 `json:"expiresAt"`
	ProxyEndpoint      string  `json:"proxyEndpoint"`
}

type ecrResponse struct {
	AuthorizationData []ecrAuthorizationData `json:"authorizationData"`
}

func (e ecrResponse) setRequestID(string) {}

// serveECR answers an AWS JSON 1.1 request for ECR.
func (s *Server) serveECR(w http.ResponseWriter, r *http.Request, requestID, target string) {
	op, ok := strings.CutPrefix(target, ecrTargetPrefix)
	if !ok {
		s.replyJSONError(w, r, &apiError{Status: http.StatusBadRequest, Code: "UnknownOperationException", Message: "unknown target " + target})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		s.replyJSONError(w, r, clientError("SerializationException", "reading request body: %v", err))
		return
	}
	resp, apiErr := s.call(op, false, r, func() (response, error) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.1") {
			return nil, clientError("SerializationException", "expected POST with Content-Type application/x-amz-json-1.1")
		}
		if op != ecrGetAuthorizationToken {
			return nil, clientError("UnknownOperationException", "the simulator serves only %s", ecrGetAuthorizationToken)
		}
		var in struct {
			RegistryIDs []string `json:"registryIds"`
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &in); err != nil {
				return nil, clientError("SerializationException", "decoding request: %v", err)
			}
		}
		token := base64.StdEncoding.EncodeToString([]byte(ecrUser + ":" + s.opts.ECRPassword))
		expires := float64(s.now().Add(ecrTokenLifetime).Unix())
		out := ecrResponse{}
		accounts := in.RegistryIDs
		if len(accounts) == 0 {
			accounts = []string{s.opts.AccountID}
		}
		for _, acct := range accounts {
			out.AuthorizationData = append(out.AuthorizationData, ecrAuthorizationData{
				AuthorizationToken: token, ExpiresAt: expires,
				ProxyEndpoint: fmt.Sprintf("https://%s.dkr.ecr.%s.amazonaws.com", acct, s.opts.Region),
			})
		}
		return out, nil
	})
	if apiErr != nil {
		s.log.Debug("ECR call failed", "op", op, "code", apiErr.Code, "request_id", requestID)
		s.replyJSONError(w, r, apiErr)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		s.replyJSONError(w, r, &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: err.Error()})
		return
	}
	s.reply(w, r, http.StatusOK, jsonContentType, out)
}

const jsonContentType = "application/x-amz-json-1.1"

// replyJSONError writes an AWS JSON error. EC2's throttling and internal
// error codes become ECR's.
func (s *Server) replyJSONError(w http.ResponseWriter, r *http.Request, e *apiError) {
	code, status := e.Code, e.Status
	switch code {
	case codeThrottle:
		code, status = "ThrottlingException", http.StatusBadRequest
	case codeInternal:
		code = "ServerException"
	}
	body, _ := json.Marshal(map[string]string{"__type": code, "message": e.Message})
	w.Header().Set("X-Amzn-ErrorType", code)
	s.reply(w, r, status, jsonContentType, body)
}
