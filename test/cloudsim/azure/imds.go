package azuresim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The Instance Metadata Service (IMDS) of every simulated VM: an HTTP
// server on a unix socket (it reaches into a cell's network namespace
// where loopback would not), at the path the CellStarter chooses
// (simcells.IMDSLocator: localcells' {imds}, given the VM's name), else
// in a directory of its own (IMDSSocket says where). It serves from the
// VM's create (when its allocation succeeds and its cell is started)
// until its cell has stopped, and answers as Azure's IMDS documents it
// (learn.microsoft.com/azure/virtual-machines/instance-metadata-service):
//
//   - Every request must carry Metadata: true and no X-Forwarded-For, else
//     400 {"error": "Bad request. Required metadata header not specified"}
//     (or naming X-Forwarded-For); only GET is served (405 otherwise).
//   - Every path but /metadata/versions needs an api-version of Azure's
//     list (imdsVersions) at or after the one that introduced its
//     category: without one 400 {"error": "Bad request. api-version was
//     not specified in the request. …", "newest-versions": […]}, an
//     unknown one 400 too. A query parameter given twice is 400, as Azure
//     rejects duplicates.
//   - GET /metadata/instance is {"compute": …, "network": …}, every value
//     a string as Azure writes them: compute has azEnvironment
//     (AzurePublicCloud), evictionPolicy, location, name, offer,
//     osProfile, osType (Linux), platformFaultDomain,
//     platformUpdateDomain, priority, provider, publisher,
//     resourceGroupName, resourceId, sku, subscriptionId, tags
//     ("k:v;k:v", by key), tagsList, version, vmId, vmSize and zone, each
//     only from the api-version that introduced it; network.interface[0]
//     is the VM's NIC: ipv4.ipAddress lists its IP configurations'
//     private addresses (the primary first: the cell's address, then
//     secondaryAddress; "" until the cell has its address) with an empty
//     publicIpAddress, ipv4.subnet their subnets' address and prefix,
//     macAddress the NIC's MAC without separators. compute.userData is
//     not in the document, as in Azure.
//   - Route parameters walk the document: /metadata/instance/compute/vmId,
//     /metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress.
//     A leaf with format=text is its text; without it (or with
//     format=json), its JSON value. A node that is not a leaf with
//     format=text is 400; a path the document lacks is 404.
//   - /metadata/instance/compute/userData is the VM's userData (base64, ""
//     when it has none), from api-version 2021-01-01.
//   - /metadata/identity/oauth2/token?resource=… is always 400
//     {"error": "invalid_request", "error_description": "Identity not
//     found"}: the simulator gives no VM a managed identity, even one whose
//     body asks for one (no token is faked); without resource it is 400
//     invalid_request too.
//   - /metadata/versions lists imdsVersions, without api-version.
//
// Anything else is 404 {"error": "Not found"}. Attested data, scheduled
// events, the load balancer category, rate limiting (5 requests a second)
// and storageProfile are not simulated. The texts of the errors Azure does
// not document (a non-leaf with format=text, X-Forwarded-For, duplicate
// parameters) are the simulator's.

// imdsVersions are the api-versions Azure's IMDS serves, newest first.
var imdsVersions = []string{
	"2025-04-07", "2024-07-17", "2024-03-15", "2023-11-15", "2023-07-01",
	"2021-12-13", "2021-11-15", "2021-11-01", "2021-10-01", "2021-08-01",
	"2021-05-01", "2021-03-01", "2021-02-01", "2021-01-01", "2020-12-01",
	"2020-10-01", "2020-09-01", "2020-07-15", "2020-06-01", "2019-11-01",
	"2019-08-15", "2019-08-01", "2019-06-04", "2019-06-01", "2019-04-30",
	"2019-03-11", "2019-02-01", "2018-10-01", "2018-04-02", "2018-02-01",
	"2017-12-01", "2017-10-01", "2017-08-01", "2017-04-02", "2017-03-01",
}

// Versions that introduced what the simulator serves.
const (
	imdsInstanceSince = "2017-04-02"
	imdsIdentitySince = "2018-02-01"
	imdsUserDataSince = "2021-01-01"
)

// Azure's error texts.
const (
	imdsNoMetadataHeader = "Bad request. Required metadata header not specified"
	imdsNoAPIVersion     = "Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds"
	imdsBadAPIVersion    = "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds"
)

// IMDSSocket returns the unix socket of the metadata service of the VM
// named name in rg, once it serves (from its create, when its allocation
// succeeds, until its cell has stopped).
func (s *Server) IMDSSocket(resourceGroup, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vms[keyOf(resourceGroup, name)]
	if v == nil {
		return "", false
	}
	return s.imds.Path(imdsKey(v))
}

// imdsKey names a VM's metadata service (and its socket in the
// simulator's directory): its name and its record's sequence number, so
// that a VM created again once its Failed create is replaced never shares
// the key of the record it replaces.
func imdsKey(v *vm) string { return v.key.name + "-" + strconv.FormatUint(v.seq, 10) }

// startIMDS serves the VM's metadata on its socket: where the
// CellStarter wants it, else in the simulator's directory. A failure is
// logged: the VM runs without metadata, which its cell will say. The
// caller holds s.mu.
func (s *Server) startIMDS(v *vm) {
	if err := s.imds.Serve(imdsKey(v), s.cells.IMDSSocket(v.cell.ID), s.imdsHandler(v)); err != nil {
		s.log.Error("serving instance metadata failed", "vm", v.name, "cell", v.cell.LogAttr, "error", err)
	}
}

// stopIMDS stops serving the VM's metadata; stopping what does not serve
// does nothing. The caller holds s.mu.
func (s *Server) stopIMDS(v *vm) { s.imds.Stop(imdsKey(v)) }

// closeIMDS stops every VM's metadata service and removes the server's
// socket directory.
func (s *Server) closeIMDS() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.imds.Close(); err != nil {
		return fmt.Errorf("closing the IMDS: %w", err)
	}
	return nil
}

// imdsHandler answers the metadata requests of one VM.
func (s *Server) imdsHandler(v *vm) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Metadata"), "true") {
			imdsError(w, http.StatusBadRequest, imdsNoMetadataHeader)
			return
		}
		if len(r.Header.Values("X-Forwarded-For")) > 0 {
			imdsError(w, http.StatusBadRequest, "Bad request. Requests with an X-Forwarded-For header are not accepted")
			return
		}
		if r.Method != http.MethodGet {
			imdsError(w, http.StatusMethodNotAllowed, "Method not allowed")
			return
		}
		q := r.URL.Query()
		for k, vals := range q {
			if len(vals) > 1 {
				imdsError(w, http.StatusBadRequest, "Bad request. Query parameter "+k+" was specified more than once")
				return
			}
		}
		path := strings.TrimSuffix(r.URL.Path, "/")
		switch {
		case path == "/metadata/versions":
			oldest := slices.Clone(imdsVersions)
			slices.Reverse(oldest)
			writeIMDS(w, http.StatusOK, map[string]any{"apiVersions": oldest})
		case path == "/metadata/identity/oauth2/token":
			if _, ok := checkAPIVersion(w, q, imdsIdentitySince); ok {
				imdsToken(w, q)
			}
		case path == "/metadata/instance" || strings.HasPrefix(path, "/metadata/instance/"):
			version, ok := checkAPIVersion(w, q, imdsInstanceSince)
			if !ok {
				return
			}
			format := q.Get("format")
			if format != "" && format != "json" && format != "text" {
				imdsError(w, http.StatusBadRequest, "Bad request. format "+format+" is not supported: json or text")
				return
			}
			rest := strings.TrimPrefix(path, "/metadata/instance")
			s.mu.Lock()
			doc := s.instanceMetadata(v, version, rest == "/compute/userData")
			s.mu.Unlock()
			imdsInstance(w, doc, rest, format)
		default:
			imdsError(w, http.StatusNotFound, "Not found")
		}
	})
}

// checkAPIVersion answers 400 unless the request's api-version is one of
// Azure's, at or after since; it returns the version.
func checkAPIVersion(w http.ResponseWriter, q url.Values, since string) (string, bool) {
	version := q.Get("api-version")
	switch {
	case version == "":
		writeIMDS(w, http.StatusBadRequest, map[string]any{"error": imdsNoAPIVersion, "newest-versions": imdsVersions[:3]})
		return "", false
	case !slices.Contains(imdsVersions, version) || version < since:
		writeIMDS(w, http.StatusBadRequest, map[string]any{"error": imdsBadAPIVersion, "newest-versions": imdsVersions[:3]})
		return "", false
	}
	return version, true
}

// imdsToken answers /metadata/identity/oauth2/token: no VM here has a
// managed identity.
func imdsToken(w http.ResponseWriter, q url.Values) {
	if q.Get("resource") == "" {
		writeIMDS(w, http.StatusBadRequest, map[string]any{"error": "invalid_request", "error_description": "Required query variable 'resource' is missing"})
		return
	}
	writeIMDS(w, http.StatusBadRequest, map[string]any{"error": "invalid_request", "error_description": "Identity not found"})
}

// imdsInstance answers a path under /metadata/instance (rest, "" for the
// document) from doc, in format ("" is json).
func imdsInstance(w http.ResponseWriter, doc map[string]any, rest, format string) {
	var node any = doc
	for seg := range strings.SplitSeq(strings.TrimPrefix(rest, "/"), "/") {
		if seg == "" {
			continue
		}
		switch n := node.(type) {
		case map[string]any:
			node = n[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n) {
				node = nil
			} else {
				node = n[i]
			}
		default:
			node = nil
		}
		if node == nil {
			imdsError(w, http.StatusNotFound, "Not found")
			return
		}
	}
	leaf, isLeaf := node.(string)
	switch {
	case format == "text" && !isLeaf:
		imdsError(w, http.StatusBadRequest, "Bad request. format=text is supported for leaf nodes only. For more information refer to aka.ms/azureimds")
	case format == "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(leaf)) //nolint:gosec // text/plain metadata of the simulated VM, for its own agent
	default:
		writeIMDS(w, http.StatusOK, node)
	}
}

// instanceMetadata is the VM's /metadata/instance document at version;
// withUserData adds compute.userData (from its version), for its own path
// only, as Azure leaves it out of the document. The caller holds s.mu.
func (s *Server) instanceMetadata(v *vm, version string, withUserData bool) map[string]any {
	props, _ := v.body["properties"].(map[string]any)
	image, _ := dig(props, "storageProfile", "imageReference").(map[string]any)
	osp, _ := props["osProfile"].(map[string]any)
	priority, _ := props["priority"].(string)
	computerName, _ := osp["computerName"].(string)
	adminUsername, _ := osp["adminUsername"].(string)
	noPassword, _ := dig(osp, "linuxConfiguration", "disablePasswordAuthentication").(bool)
	userData, _ := props["userData"].(string)
	keys := make([]string, 0, len(v.tags))
	for k := range v.tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var tags []string
	tagsList := []any{}
	for _, k := range keys {
		tags = append(tags, k+":"+v.tags[k])
		tagsList = append(tagsList, map[string]any{"name": k, "value": v.tags[k]})
	}
	fields := []struct {
		name, since string
		value       any
	}{
		{"azEnvironment", "2018-10-01", "AzurePublicCloud"},
		{"evictionPolicy", "2020-12-01", v.eviction},
		{"location", "2017-04-02", s.opts.Location},
		{"name", "2017-04-02", v.name},
		{"offer", "2017-04-02", str(image["offer"])},
		{"osProfile", "2020-07-15", map[string]any{
			"adminUsername": adminUsername, "computerName": cmp.Or(computerName, v.name),
			"disablePasswordAuthentication": strconv.FormatBool(noPassword),
		}},
		{"osType", "2017-04-02", "Linux"},
		{"platformFaultDomain", "2017-04-02", "0"},
		{"platformUpdateDomain", "2017-04-02", "0"},
		{"priority", "2020-12-01", priority},
		{"provider", "2018-10-01", "Microsoft.Compute"},
		{"publisher", "2017-04-02", str(image["publisher"])},
		{"resourceGroupName", "2017-08-01", v.rg},
		{"resourceId", "2019-03-11", s.resourceID(v.rg, "Microsoft.Compute/virtualMachines", v.name)},
		{"sku", "2017-04-02", str(image["sku"])},
		{"subscriptionId", "2017-08-01", s.opts.Subscription},
		{"tags", "2017-08-01", strings.Join(tags, ";")},
		{"tagsList", "2019-06-04", tagsList},
		{"version", "2017-04-02", str(image["version"])},
		{"vmId", "2017-04-02", v.vmID},
		{"vmSize", "2017-04-02", v.size.Name},
		{"zone", "2017-12-01", v.zone},
	}
	compute := map[string]any{}
	for _, f := range fields {
		if version >= f.since {
			compute[f.name] = f.value
		}
	}
	if withUserData && version >= imdsUserDataSince {
		compute["userData"] = userData
	}
	return map[string]any{"compute": compute, "network": map[string]any{"interface": s.imdsInterfaces(v)}}
}

// imdsInterfaces is network.interface of the VM's metadata: its NIC, or
// none when it has none. The caller holds s.mu.
func (s *Server) imdsInterfaces(v *vm) []any {
	n := s.nics[keyOf(v.rg, v.nicName)]
	if n == nil || n.vm != v {
		return []any{}
	}
	addrs := []any{map[string]any{"privateIpAddress": v.cell.Address, "publicIpAddress": ""}}
	subnetIDs := []string{n.subnetID}
	for k, ic := range n.secondaries {
		addrs = append(addrs, map[string]any{"privateIpAddress": v.secondaryAddress(k), "publicIpAddress": ""})
		if !slices.ContainsFunc(subnetIDs, func(id string) bool { return strings.EqualFold(id, ic.subnetID) }) {
			subnetIDs = append(subnetIDs, ic.subnetID)
		}
	}
	subnets := []any{}
	for _, id := range subnetIDs {
		sn, ok := s.subnetByID(id)
		if !ok {
			continue
		}
		if p, err := netip.ParsePrefix(sn.AddressPrefix); err == nil {
			subnets = append(subnets, map[string]any{"address": p.Masked().Addr().String(), "prefix": strconv.Itoa(p.Bits())})
		}
	}
	return []any{map[string]any{
		"ipv4":       map[string]any{"ipAddress": addrs, "subnet": subnets},
		"ipv6":       map[string]any{"ipAddress": []any{}},
		"macAddress": strings.ReplaceAll(n.mac, "-", ""),
	}}
}

// dig is the value at keys of nested JSON objects, or nil.
func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[k]
	}
	return cur
}

// str is v if it is a string, else "" (IMDS writes a missing value as "").
func str(v any) string {
	s, _ := v.(string)
	return s
}

// writeIMDS answers with body as JSON, as IMDS does.
func writeIMDS(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"Internal server error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b) //nolint:gosec // JSON metadata of the simulated VM, for its own agent
}

// imdsError answers an error as IMDS does: {"error": msg}.
func imdsError(w http.ResponseWriter, status int, msg string) {
	writeIMDS(w, status, map[string]any{"error": msg})
}
