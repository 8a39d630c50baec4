package gce

// configSchema is the JSON Schema of Config, reported by GetInfo for
// documentation and tooling. Configure remains the authority: it checks
// what a schema cannot (that the subnetwork and the image exist). A test
// keeps the two in step.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "kip-plugin-gce configuration",
  "type": "object",
  "additionalProperties": false,
  "required": ["project", "region", "subnetwork", "image"],
  "properties": {
    "project": {"description": "The Google Cloud project ID of the cells.", "type": "string"},
    "region": {"description": "The cells' region, such as us-central1.", "type": "string", "pattern": "^[a-z]+(-[a-z]+)*[0-9]+$"},
    "zones": {
      "description": "The region's zones the cells may use, such as us-central1-a; the catalog offers them. Omitted, every zone of the region.",
      "type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true
    },
    "network": {"description": "The VPC network's name; omitted, the subnetwork's. Set, it must be the subnetwork's.", "type": "string"},
    "subnetwork": {"description": "The name of the region's subnetwork of the cells (checked with subnetworks.get at Configure).", "type": "string"},
    "serviceAccount": {"description": "Email of the cells' service account; omitted, the cells run without one. kip's role then needs iam.serviceAccounts.actAs on it.", "type": "string"},
    "scopes": {
      "description": "OAuth scopes of the cells' service account; omitted, cloud-platform (IAM decides).",
      "type": "array", "items": {"type": "string"}, "uniqueItems": true
    },
    "image": {
      "description": "The cells' boot image: by name, or by family (the family's newest image, chosen at every Configure), in project (omitted: the cells' project).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "name": {"type": "string"},
        "family": {"type": "string"},
        "project": {"type": "string"}
      },
      "oneOf": [{"required": ["name"]}, {"required": ["family"]}]
    },
    "networkTags": {
      "description": "Network tags of every cell: the firewall rule that opens TCP 6421 to kip targets them.",
      "type": "array", "items": {"type": "string"}, "uniqueItems": true
    },
    "labels": {
      "description": "Labels of every instance and boot disk, beside kip-cluster, kip-node, kip-cell and kip-pod-uid (Compute Engine label syntax).",
      "type": "object",
      "additionalProperties": {"type": "string", "maxLength": 63},
      "maxProperties": 60
    },
    "bootDisk": {
      "description": "The cells' boot disk: size in GB (omitted: the image's, or the pod's volume size) and type (omitted: pd-balanced).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "sizeGb": {"type": "integer", "minimum": 10},
        "type": {"type": "string", "default": "pd-balanced"}
      }
    },
    "endpoint": {"description": "Overrides the Compute Engine endpoint: a Private Service Connect endpoint, or a simulator (http or https URL).", "type": "string"},
    "caBundle": {"description": "Path of a PEM file of extra CA certificates to trust for the endpoint and identity.certsURL.", "type": "string"},
    "credentialsFile": {"description": "Path of a service account key or external account file; omitted, Application Default Credentials.", "type": "string"},
    "withoutAuthentication": {"description": "Send no credentials (with endpoint only: a simulator, or a proxy that authenticates).", "type": "boolean", "default": false},
    "rateLimit": {
      "description": "Client-side limit of the plugin's Compute Engine calls: token buckets for reads (and operation waits) and for calls that change something.",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "readPerSecond": {"type": "number", "exclusiveMinimum": 0, "default": 10},
        "mutatePerSecond": {"type": "number", "exclusiveMinimum": 0, "default": 5},
        "burst": {"type": "integer", "minimum": 1, "default": 20}
      }
    },
    "metadata": {
      "description": "Extra metadata items of every cell, such as kip-cell-url and kip-cell-sha256 for the boot recipe (deploy/gce/startup.sh); kip-bootstrap, kip-tags and startup-script are the plugin's.",
      "type": "object",
      "additionalProperties": {"type": "string"}
    },
    "identity": {
      "description": "How the cells' identity tokens are checked before kip signs a cell's certificate (needs serviceAccount: a cell without one has no token).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "certsURL": {"description": "JWKS of the keys that sign identity tokens: a simulator's or a private mirror's (http or https URL).", "type": "string", "default": "https://www.googleapis.com/oauth2/v3/certs"}
      }
    },
    "startupScript": {"description": "Path of the cells' startup script (metadata startup-script, deploy/gce/startup.sh); omitted, the image runs kip-cell by itself.", "type": "string"}
  }
}`
