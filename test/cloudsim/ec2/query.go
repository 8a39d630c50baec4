package ec2sim

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// apiVersion is the EC2 API version the SDK sends and the XML namespace
// answers carry.
const (
	apiVersion = "2016-11-15"
	xmlns      = "http://ec2.amazonaws.com/doc/" + apiVersion + "/"
)

// apiError is an error answered to the client: an EC2 error code with its
// HTTP status.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func clientError(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// EC2 error codes the simulator answers with.
const (
	codeThrottle           = "RequestLimitExceeded"
	codeInternal           = "InternalError"
	codeInsufficient       = "InsufficientInstanceCapacity"
	codeIdempotentMismatch = "IdempotentParameterMismatch"
	codeInvalidParameter   = "InvalidParameterValue"
	codeInvalidCombination = "InvalidParameterCombination"
	// codeInvalidParameterDependency: a parameter given without the one it
	// needs (KmsKeyId without Encrypted).
	codeInvalidParameterDependency = "InvalidParameterDependency"
	codeMissingParameter           = "MissingParameter"
	codeInstanceNotFound           = "InvalidInstanceID.NotFound"
	codeInstanceMalformed          = "InvalidInstanceID.Malformed"
	codeAMINotFound                = "InvalidAMIID.NotFound"
	codeAMIMalformed               = "InvalidAMIID.Malformed"
	codeSubnetNotFound             = "InvalidSubnetID.NotFound"
	codeGroupMalformed             = "InvalidGroupId.Malformed"
	codeUnsupported                = "Unsupported"
	codeInvalidAction              = "InvalidAction"
	codeAuthFailure                = "AuthFailure"
	codeDryRun                     = "DryRunOperation"
	codeInvalidToken               = "InvalidPaginationToken"
	codeTagLimitExceeded           = "TagLimitExceeded"
)

// Messages EC2 answers with.
const (
	defaultThrottleMessage = "Request limit exceeded."
	defaultInternalMessage = "An internal error has occurred"
	idempotentMismatchMsg  = "Arguments on this idempotent request are inconsistent with arguments used in previous request(s)."
	dryRunMessage          = "Request would have succeeded, but DryRun flag is set."
)

// EC2's limits, and the simulator's.
const (
	maxTagsPerResource      = 50
	maxUserDataBytes        = 16 * 1024
	minMaxResults           = 5
	maxMaxResults           = 1000
	maxInstancesPerRun      = 100
	maxClientTokenLength    = 64
	defaultInstanceRootName = "/dev/xvda"
)

// form is a parsed EC2 Query request body.
type form url.Values

func (f form) get(key string) string { return url.Values(f).Get(key) }

func (f form) has(key string) bool {
	_, ok := f[key]
	return ok
}

// list returns the values of the flattened list prefix.1, prefix.2, …
func (f form) list(prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		k := prefix + "." + strconv.Itoa(i)
		if !f.has(k) {
			return out
		}
		out = append(out, f.get(k))
	}
}

// count returns how many members the flattened list of structures prefix
// has: prefix.N.<anything> for N = 1, 2, …
func (f form) count(prefix string) int {
	n := 0
	for {
		p := prefix + "." + strconv.Itoa(n+1) + "."
		found := false
		for k := range f {
			if strings.HasPrefix(k, p) {
				found = true
				break
			}
		}
		if !found {
			return n
		}
		n++
	}
}

// integer parses an optional integer parameter.
func (f form) integer(key string) (int, bool, error) {
	if !f.has(key) {
		return 0, false, nil
	}
	n, err := strconv.Atoi(f.get(key))
	if err != nil {
		return 0, true, clientError(codeInvalidParameter, "Invalid value '%s' for %s", f.get(key), key)
	}
	return n, true, nil
}

// boolean parses an optional boolean parameter.
func (f form) boolean(key string) (bool, error) {
	if !f.has(key) {
		return false, nil
	}
	switch f.get(key) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, clientError(codeInvalidParameter, "Invalid value '%s' for %s", f.get(key), key)
	}
}

// canonical is the request's parameters except the ones named in skip, in a
// stable order: two requests with equal canonical forms asked for the same
// thing.
func (f form) canonical(skip ...string) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		if !slices.Contains(skip, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range f[k] {
			b.WriteString(url.QueryEscape(k))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
			b.WriteByte('&')
		}
	}
	return b.String()
}

// dryRun answers DryRunOperation when the request sets DryRun.
func (f form) dryRun() error {
	dry, err := f.boolean("DryRun")
	if err != nil {
		return err
	}
	if dry {
		return &apiError{Status: http.StatusPreconditionFailed, Code: codeDryRun, Message: dryRunMessage}
	}
	return nil
}

// filter is one Filter.N of a Describe request: it matches when any of the
// resource's values for Name matches any of Values (with * and ?).
type filter struct {
	Name   string
	Values []string
}

// filters parses Filter.N.Name and Filter.N.Value.M.
func (f form) filters() []filter {
	n := f.count("Filter")
	out := make([]filter, 0, n)
	for i := 1; i <= n; i++ {
		p := "Filter." + strconv.Itoa(i)
		out = append(out, filter{Name: f.get(p + ".Name"), Values: f.list(p + ".Value")})
	}
	return out
}

// fieldFunc returns the values of one filterable field of a resource.
type fieldFunc[T any] func(T) []string

// matchFilters reports whether r passes every filter. Filter names are
// looked up in fields; "tag:<key>", "tag-key" and "tag-value" use tags.
func matchFilters[T any](r T, filters []filter, fields map[string]fieldFunc[T], tags func(T) map[string]string) bool {
	for _, flt := range filters {
		var values []string
		switch {
		case strings.HasPrefix(flt.Name, "tag:") && tags != nil:
			if v, ok := tags(r)[strings.TrimPrefix(flt.Name, "tag:")]; ok {
				values = []string{v}
			}
		case flt.Name == "tag-key" && tags != nil:
			for k := range tags(r) {
				values = append(values, k)
			}
		case flt.Name == "tag-value" && tags != nil:
			for _, v := range tags(r) {
				values = append(values, v)
			}
		default:
			values = fields[flt.Name](r)
		}
		if !anyMatch(flt.Values, values) {
			return false
		}
	}
	return true
}

// checkFilters refuses filter names the resource does not support, and
// filters without values, as EC2 does.
func checkFilters[T any](filters []filter, fields map[string]fieldFunc[T], tagged bool) error {
	for _, flt := range filters {
		switch {
		case flt.Name == "":
			return clientError(codeInvalidParameter, "The filter 'null' is invalid")
		case len(flt.Values) == 0:
			return clientError(codeInvalidParameter, "The filter '%s' has no values", flt.Name)
		case tagged && (strings.HasPrefix(flt.Name, "tag:") || flt.Name == "tag-key" || flt.Name == "tag-value"):
		case fields[flt.Name] == nil:
			return clientError(codeInvalidParameter, "The filter '%s' is invalid", flt.Name)
		}
	}
	return nil
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if globMatch(p, v) {
				return true
			}
		}
	}
	return false
}

// globMatch matches s against an EC2 filter value: * is any run of
// characters (including none and "/"), ? is one character, and a backslash
// escapes the next character.
func globMatch(pattern, s string) bool {
	p, v := []rune(pattern), []rune(s)
	// Iterative matcher with backtracking to the last star.
	pi, vi, star, mark := 0, 0, -1, 0
	for vi < len(v) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, vi
			pi++
		case pi < len(p) && p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == v[vi]:
			pi += 2
			vi++
		case pi < len(p) && p[pi] != '\\' && (p[pi] == '?' || p[pi] == v[vi]):
			pi++
			vi++
		case star >= 0:
			pi, mark = star+1, mark+1
			vi = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// pageParams reads MaxResults and NextToken. maxResults is 0 when absent.
func pageParams(f form) (maxResults int, after int64, err error) {
	n, set, err := f.integer("MaxResults")
	if err != nil {
		return 0, 0, err
	}
	if set && (n < minMaxResults || n > maxMaxResults) {
		return 0, 0, clientError(codeInvalidParameter, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", n, minMaxResults, maxMaxResults)
	}
	after = -1
	if tok := f.get("NextToken"); tok != "" {
		raw, derr := base64.RawURLEncoding.DecodeString(tok)
		s, ok := strings.CutPrefix(string(raw), "ec2sim:")
		if derr != nil || !ok {
			return 0, 0, clientError(codeInvalidToken, "Invalid pagination token")
		}
		if after, err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, clientError(codeInvalidToken, "Invalid pagination token")
		}
	}
	return n, after, nil
}

// paginate returns the items after the token's position, at most
// maxResults of them (all, up to 1000, when 0), and the token of the next
// page. Items are in increasing order of pos, which never changes for an
// item, so a page boundary survives items appearing and disappearing.
func paginate[T any](items []T, pos func(T) int64, maxResults int, after int64) ([]T, string) {
	if maxResults == 0 {
		maxResults = maxMaxResults
	}
	start := 0
	for start < len(items) && pos(items[start]) <= after {
		start++
	}
	end := min(start+maxResults, len(items))
	page := items[start:end]
	if end == len(items) || len(page) == 0 {
		return page, ""
	}
	return page, base64.RawURLEncoding.EncodeToString([]byte("ec2sim:" + strconv.FormatInt(pos(page[len(page)-1]), 10)))
}

// response fields every EC2 answer carries.
type responseMeta struct {
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
}

// setRequestID lets the server fill in the namespace and request ID of
// any answer.
func (m *responseMeta) setRequestID(id string) {
	m.Xmlns = xmlns
	m.RequestID = id
}

type response interface{ setRequestID(string) }

// encodeXML renders an answer with the XML declaration.
func encodeXML(v any) []byte {
	body, err := xml.Marshal(v)
	if err != nil {
		// Only a bug in the response types gets here.
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return append([]byte(xml.Header), body...)
}

// errorResponse is EC2's error body, as aws/protocol/ec2query parses it.
type errorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []xmlError `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

type xmlError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func ec2ErrorBody(requestID string, e *apiError) []byte {
	return encodeXML(errorResponse{Errors: []xmlError{{e.Code, e.Message}}, RequestID: requestID})
}
