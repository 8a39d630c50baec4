package azure

// configSchema is the JSON Schema of Config, reported by GetInfo for
// documentation and tooling. Configure remains the authority: it checks
// what a schema cannot (that the subnet exists). A test keeps the two in
// step.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "kip-plugin-azure configuration",
  "type": "object",
  "additionalProperties": false,
  "required": ["subscriptionID", "resourceGroup", "location", "subnetID", "image"],
  "properties": {
    "subscriptionID": {"description": "The Azure subscription of the cells (a GUID).", "type": "string"},
    "resourceGroup": {"description": "The resource group of every cell's VM, NIC and OS disk (it must exist; one per cluster keeps List small). The contract's instance ID is the VM name within it.", "type": "string"},
    "location": {"description": "The cells' location, such as eastus.", "type": "string", "pattern": "^[a-z][a-z0-9]{1,39}$"},
    "zones": {
      "description": "The location's availability zones the cells may use; omitted, [\"1\", \"2\", \"3\"]. The contract's zones are <location>-<zone>, such as eastus-1.",
      "type": "array", "items": {"type": "string", "pattern": "^[1-9]$"}, "minItems": 1, "uniqueItems": true
    },
    "subnetID": {"description": "Resource ID of the cells' subnet (checked with subnets get at Configure).", "type": "string"},
    "networkSecurityGroupID": {"description": "Resource ID of a network security group put on every cell's NIC; omitted, the subnet's rules alone apply.", "type": "string"},
    "image": {
      "description": "The cells' image: a marketplace image (publisher, offer, sku, version; version omitted: latest) or an image or gallery image version's resource ID (id).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "publisher": {"type": "string"},
        "offer": {"type": "string"},
        "sku": {"type": "string"},
        "version": {"type": "string", "default": "latest"},
        "id": {"type": "string"}
      },
      "oneOf": [{"required": ["publisher", "offer", "sku"]}, {"required": ["id"]}]
    },
    "identity": {"description": "Resource ID of a user-assigned managed identity the cells run with; omitted, none.", "type": "string"},
    "tags": {
      "description": "Tags of every cell's VM, beside kip-cluster, kip-node, kip-cell and kip-pod-uid (names without < > % & \\ ? /).",
      "type": "object",
      "additionalProperties": {"type": "string", "maxLength": 256},
      "maxProperties": 46
    },
    "credentials": {
      "description": "The plugin's service principal: tenant and client IDs and a file holding its secret or its certificate (PEM or PKCS#12 with the key). Omitted, azidentity's default chain (environment, workload identity, managed identity, Azure CLI).",
      "type": "object",
      "additionalProperties": false,
      "required": ["tenantID", "clientID"],
      "properties": {
        "tenantID": {"type": "string"},
        "clientID": {"type": "string"},
        "clientSecretFile": {"type": "string"},
        "clientCertificateFile": {"type": "string"}
      },
      "oneOf": [{"required": ["clientSecretFile"]}, {"required": ["clientCertificateFile"]}]
    },
    "endpoint": {"description": "Azure Resource Manager's endpoint of a private cloud or a simulator (https URL); omitted, Azure's public cloud.", "type": "string"},
    "caBundle": {"description": "Path of a PEM file of extra CA certificates to trust for the endpoint.", "type": "string"},
    "withoutAuthentication": {"description": "Send a static bearer token instead of credentials (with endpoint only: a simulator).", "type": "boolean", "default": false},
    "rateLimit": {
      "description": "Client-side limit of the plugin's Azure Resource Manager calls: token buckets for reads (GET, operation polls included) and for calls that change something (PUT, DELETE).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "readPerSecond": {"type": "number", "exclusiveMinimum": 0, "default": 10},
        "mutatePerSecond": {"type": "number", "exclusiveMinimum": 0, "default": 5},
        "burst": {"type": "integer", "minimum": 1, "default": 20}
      }
    },
    "customData": {"description": "Path of the cells' cloud-init customData (deploy/azure/cloud-init.yaml); omitted, the image runs kip-cell by itself.", "type": "string"},
    "adminUsername": {"description": "The cells' Linux administrator.", "type": "string", "default": "kipadmin"},
    "sshPublicKey": {"description": "The administrator's SSH public key (one authorized_keys line); omitted, a throw-away key the plugin generates and forgets, so nobody can log in.", "type": "string"}
  }
}`
