// Package gcesim is a wire-level Compute Engine simulator: an HTTP server
// that speaks the Compute REST API (JSON) well enough that the real
// cloud.google.com/go/compute v1.74.0 REST clients (apiv1), pointed at it
// with option.WithEndpoint and option.WithoutAuthentication, insert, read,
// list and delete instances and wait for their operations as they would in
// a project.
//
// The directory is test/cloudsim/gce; the package is named gcesim so that
// it does not clash with the SDK's compute package in the files that use
// both.
//
// # Using it
//
//	sim := gcesim.New(gcesim.Options{Project: "p"})
//	url, err := sim.Start() // http://127.0.0.1:<port>
//	defer sim.Close()
//	ic, err := compute.NewInstancesRESTClient(ctx, option.WithEndpoint(url), option.WithoutAuthentication())
//
// A Server is also an http.Handler, for httptest.NewServer.
//
// # What it simulates
//
// Paths are those the client sends (../shared/research/cloud-sdks.md §2.3),
// under /compute/v1/projects/{project}; method names are GCE's, which
// Calls counts (including calls answered with an error):
//
//	compute.instances.insert            POST   zones/{z}/instances?requestId=
//	compute.instances.get               GET    zones/{z}/instances/{name}
//	compute.instances.delete            DELETE zones/{z}/instances/{name}?requestId=
//	compute.instances.list              GET    zones/{z}/instances?filter=&maxResults=&pageToken=
//	compute.instances.aggregatedList    GET    aggregated/instances (same parameters)
//	compute.zoneOperations.get          GET    zones/{z}/operations/{op}
//	compute.zoneOperations.wait         POST   zones/{z}/operations/{op}/wait
//	compute.instances.getSerialPortOutput GET  zones/{z}/instances/{name}/serialPort?port=&start=
//	compute.machineTypes.get            GET    zones/{z}/machineTypes/{type}
//	compute.machineTypes.list           GET    zones/{z}/machineTypes?filter=&maxResults=&pageToken=
//	compute.machineTypes.aggregatedList GET    aggregated/machineTypes (same parameters)
//	compute.zones.get                   GET    zones/{z}
//	compute.zones.list                  GET    zones?filter=&maxResults=&pageToken=
//	compute.regions.get                 GET    regions/{r}
//	compute.images.get                  GET    global/images/{name}          (any project)
//	compute.images.getFromFamily        GET    global/images/family/{family} (any project)
//	compute.subnetworks.get             GET    regions/{r}/subnetworks/{s}
//	compute.networks.get                GET    global/networks/{n}
//	compute.zoneOperations.list         GET    zones/{z}/operations?filter=&maxResults=&pageToken=
//	compute.globalOperations.get        GET    global/operations/{op}
//	compute.globalOperations.wait       POST   global/operations/{op}/wait
//	compute.globalOperations.list       GET    global/operations (same parameters)
//	compute.globalOperations.aggregatedList GET aggregated/operations (same parameters)
//	compute.disks.insert                POST   zones/{z}/disks?requestId=
//	compute.disks.get                   GET    zones/{z}/disks/{name}
//	compute.disks.list                  GET    zones/{z}/disks (same parameters)
//	compute.disks.delete                DELETE zones/{z}/disks/{name}?requestId=
//	compute.instances.attachDisk        POST   zones/{z}/instances/{name}/attachDisk?requestId=
//	compute.instances.detachDisk        POST   zones/{z}/instances/{name}/detachDisk?deviceName=&requestId=
//
// Zonal persistent disks follow disks.go's comment: CREATING, READY and
// DELETING disks; attach and detach as operations on the instance, whose
// disks[] (boot disk first) and the disk's users[] change once they are
// DONE; READ_WRITE on one instance or READ_ONLY on several; the machine
// type's maximumPersistentDisks; the disk types a machine series cannot
// take (N4: no Persistent Disk; C3: no pd-standard or pd-extreme;
// UNSUPPORTED_OPERATION); GCE's errors, at once or in the operation. With a simcells.DiskStarter as Options.Cells, each disk is a
// real block device, given to the instance's cell at DiskPath(deviceName)
// (/dev/disk/by-id/google-<deviceName>); an operation stays RUNNING until
// the DiskStarter's call returned, and a detach until the cell let go.
//
// Insert is idempotent on requestId (a UUID, as GCE requires): a repeat
// returns the first operation and changes nothing, whatever its body. The
// instance's name is GCE's uniqueness key in a zone: another insert of a
// name that exists, with another or no requestId, is a 409 alreadyExists.
// Names, machine types (zones/{z}/machineTypes/{type}, in the request's
// zone, one the zone offers: 400 invalid otherwise), labels (lowercase, 63
// characters), the network interfaces' network and subnetwork and the
// boot disk's sourceImage (an image or a family, 404 notFound when it
// does not exist; an OBSOLETE or DELETED image, or a boot image of
// another architecture than the machine type's, is 400 invalid) are
// checked as GCE checks them. An instance answers with what the client sent plus what GCE fills
// in (id as a string, status, zone and machineType URLs, selfLink,
// creationTimestamp, lastStartTimestamp, nic0 with a networkIP and its
// network and subnetwork as full URLs,
// resourceStatus.upcomingMaintenance while a maintenance is scheduled).
// scheduling.provisioningModel (STANDARD, SPOT) and
// instanceTerminationAction (STOP, DELETE; Spot or preemptible only) are
// checked as GCE checks them.
//
// An instance is PROVISIONING for the first half of the boot delay,
// STAGING for the second (and until its cell started) and RUNNING after; a
// deleted one is STOPPING for the shutdown delay (and until its cell
// stopped), then TERMINATED, and gone (get is notFound, list leaves it
// out, the name is free) Options.TerminatedVisible later. States
// and timestamps are computed when read, from the injected clock
// (Options.Now), so tests move time instead of sleeping. An operation is
// RUNNING until Options.OperationDelay has passed (a delete's also until
// its instance is TERMINATED) and DONE after; with no delay it is DONE on
// the client's first poll, which costs Operation.Wait no sleep.
// zoneOperations.wait holds the request (in real time, at most
// Options.MaxWait) until the operation is DONE by the clock, and otherwise
// answers it as it is, which GCE's documentation allows.
//
// Errors are GCE's body, {"error":{"code","message","errors":[{"message",
// "domain","reason"}]}}, with GCE's status codes and reasons (notFound 404,
// alreadyExists 409, invalid 400), which the client surfaces as an
// *apierror.APIError wrapping a *googleapi.Error. list's filter takes
// comparisons (=, !=, and : for contains or :* for set) of name, status,
// zone, machineType and labels.<key> (machineTypes': name, zone,
// guestCpus, memoryMb and isSharedCpu; zones': name, status and region;
// operations': name, operationType, targetLink, targetId, status, user,
// zone), joined by spaces or AND, or all by OR (a filter that mixes the
// two is invalid: GCE documents no precedence), each optionally in
// parentheses; any other field is an invalid filter, so a client that
// relies on one the simulator does not evaluate finds out.
// Pages hold maxResults (0 to 500; 500 by default) items in insert
// order; pageToken is opaque. aggregatedList has a scope per zone (for
// operations also global and the region), with its items on the page or
// GCE's NO_RESULTS_ON_PAGE warning. Nothing the simulator does starts a
// global operation yet; global ones are served for the plugin's lookups.
//
// # Real cells
//
// Every instance gets a real cell through Options.Cells, a
// simcells.CellStarter (localcells.LocalCells runs the kip-plugin-local
// binary; the lifecycle is simcells.Lifecycle, shared with ec2sim): the
// cell's ID is the instance's name, its type the machine type's name, its
// bootstrap the instance's kip-bootstrap metadata item (BootstrapKey,
// LaunchRequest.Bootstrap verbatim, as the startup script hands it to
// kip-cell --bootstrap), and its address nic0's networkIP (absent until
// the cell started). The agent starts Options.AgentDelay after the
// instance runs (SetAgentDelay) or never (SilenceAgents). Delete and
// preemption stop the cell; Close stops every cell still running. With
// no CellStarter, instances get an address of 10.128.0.0/16 and no
// process.
//
// # Instance metadata and identity tokens
//
// Every instance gets a metadata server from its insert until its cell
// stopped (metadata.go): HTTP on a unix socket, where the CellStarter
// wants it (simcells.IMDSLocator: localcells' {imds}, which the agent
// reaches with kip-cell --gce-metadata-endpoint unix://{imds}), else in
// a directory of the simulator's (MetadataSocket). It answers
// /computeMetadata/v1/ with Metadata-Flavor: Google only, as GCE's does:
// the instance's name, ID, zone, address and metadata items, the
// project's ID and number (Options.ProjectNumber), and the identity token
// of instance/service-accounts/default/identity (audience, format
// standard or full), a JWT signed RS256 by the simulator's key with
// Google's claims (iss https://accounts.google.com, aud, iat, exp an hour
// later, and with format full google.compute_engine: project_id,
// project_number, zone, instance_id, instance_name,
// instance_creation_timestamp); an instance without serviceAccounts has
// none (404). The simulator serves the key's JWKS at /oauth2/v3/certs
// (IdentityCertsURL, with Cache-Control max-age as Google's
// www.googleapis.com/oauth2/v3/certs), what the gce plugin's
// identity.certsURL points at.
//
// # The project's resources
//
// Options.MachineTypes (DefaultMachineTypes: common E2, N1, N2, N2D, N4,
// C2D, C3, T2D, T2A, G2 and A2 types with GCE's vCPUs and memory, which a
// test keeps equal to plugins/gce/catalog/gce.json, in every zone; a
// type's Zones restrict it) are what machineTypes answers: guestCpus,
// memoryMb, isSharedCpu, accelerators (guestAcceleratorType,
// guestAcceleratorCount) for the GPU types, architecture, zone by name,
// no deprecated. Custom machine types (custom-4-8192 for N1,
// e2-custom-2-4096, e2-custom-small-2048, n2-, n2d-, n4-custom-…, with
// -ext for extended memory) resolve on get and insert in a zone that
// offers a predefined type of the series, within GCE's documented limits
// (vCPU counts, 256 MiB steps, memory per vCPU; 400 invalid outside
// them); list and aggregatedList leave them out, as GCE does. Options.Zones
// are zones.list's (status UP, region URL) and Options.Region the only
// region. Options.Images (DefaultImages: Debian 12 for amd64 and arm64 and
// Debian 13 in project debian-cloud, each family with a DEPRECATED older
// build) are answered in their own projects; getFromFamily is the newest
// image of the family that is not deprecated. Options.Subnetworks and
// Options.Networks default to the auto-mode network default with its
// subnetwork default (10.128.0.0/20) in the region. The serial port
// (port 1) shows a Debian boot log once the instance is RUNNING, with the
// guest agent running the startup-script of its metadata; start and next
// are byte positions in it (a negative start counts from the end), as
// GCE's.
//
// # Knobs
//
// Every knob is safe for concurrent use. SetBootDelay, SetShutdownDelay,
// SetOperationDelay, SetAgentDelay, SilenceAgents; from simknobs (shared
// with ec2sim): InjectFault and ClearFaults (any reason and status, any
// method by GCE's name, optionally AfterEffect: the call takes effect and
// its answer is lost, so a retry must use the same requestId),
// SetRateLimit (a token bucket over all calls, answering 403
// rateLimitExceeded in the usageLimits domain with status
// PERMISSION_DENIED and a google.rpc.ErrorInfo RATE_LIMIT_EXCEEDED, as
// GCE's quota system does; GCE may also answer 429 RESOURCE_EXHAUSTED,
// which InjectFault can play), SetLatency, and the counters Calls (by
// method name, errors included), MaxCallsPerSecond, Throttled and
// ResetCalls.
//
// Inserts can end in a failed operation (DONE, no instance created):
// InjectStockout per machine type and zone (the most specific applies;
// ClearStockouts) with ZONE_RESOURCE_POOL_EXHAUSTED,
// ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS or STOCKOUT, with
// httpErrorStatusCode 503 and httpErrorMessage, or without them
// (Stockout.WithoutHTTPStatus), the form on which the client's
// Operation.Wait returns nil; InjectQuota per metric and region
// (ClearQuotas): QUOTA_EXCEEDED "Quota 'CPUS' exceeded.  Limit: 24.0 in
// region us-central1." with errorDetails quotaInfo {metricName,
// limitName, dimensions{region}, limit} and httpErrorStatusCode 403, for
// the inserts that use the metric (CPUS for standard instances,
// PREEMPTIBLE_CPUS for Spot, NVIDIA_T4_GPUS and PREEMPTIBLE_NVIDIA_T4_GPUS
// for guestAccelerators nvidia-tesla-t4, and so on).
//
// Preempt reclaims a Spot instance: a DONE compute.instances.preempted
// operation in its zone (user system, statusMessage "Instance was
// preempted."), STOPPING for the shutdown delay while its cell stops,
// TERMINATED, and deleted after with instanceTerminationAction DELETE.
// ScheduleMaintenance puts resourceStatus.upcomingMaintenance {type
// SCHEDULED, maintenanceStatus PENDING, windowStartTime, windowEndTime,
// canReschedule} on an instance, a day ahead for two hours (ONGOING in
// the window, gone after). Instance and Instances show what was inserted,
// with the body the client sent, its address and whether its agent
// started.
//
// # Not yet
//
// Operations of host maintenance (compute.instances.hostMaintenance, migrations) are not
// emitted; a maintenance window passes without touching the instance.
//
// This package is test support: it imports the standard library and what
// it shares with ec2sim: test/cloudsim/simhttp (the HTTP server's start,
// stop and gzip), test/cloudsim/simcells (the cell lifecycle) and
// test/cloudsim/simknobs (faults, rate limit, latency, counters; it
// brings golang.org/x/time). Its own tests also import
// test/cloudsim/simcells/localcells (real cells). Only the tests of
// test/cloudsim/gce/sdktest (a module of its own, outside go.work, see
// plugins/gce/doc.go) import the Google Cloud SDK, so
// that the simulator checks the SDK's wire format instead of sharing its
// types, and the root module's build list does not carry the SDK.
package gcesim
