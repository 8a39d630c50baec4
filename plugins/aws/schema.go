package aws

// configSchema is the JSON Schema of Config, reported by GetInfo for
// documentation and tooling. Configure remains the authority: it checks
// what a schema cannot (that the subnets and the image exist). A test keeps
// the two in step.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "kip-plugin-aws configuration",
  "type": "object",
  "additionalProperties": false,
  "required": ["region", "image"],
  "anyOf": [{"required": ["subnets"]}, {"required": ["vpcID"]}],
  "properties": {
    "region": {
      "description": "The AWS region of the cells, such as us-east-1.",
      "type": "string",
      "pattern": "^[a-z]{2,4}(-[a-z]+)+-[0-9]+$"
    },
    "endpointURL": {
      "description": "Overrides the EC2 endpoint: a VPC interface endpoint, a private endpoint, or an EC2 simulator (http or https URL).",
      "type": "string"
    },
    "ecrEndpointURL": {
      "description": "Overrides the ECR endpoint used for registry credentials (http or https URL).",
      "type": "string"
    },
    "caBundle": {
      "description": "Path of a PEM file of extra CA certificates to trust for the endpoints.",
      "type": "string"
    },
    "credentials": {
      "description": "Static credentials. Omitted, the SDK's default chain applies: environment, shared files, web identity (IRSA), container or instance role.",
      "type": "object",
      "additionalProperties": false,
      "required": ["accessKeyID", "secretAccessKey"],
      "properties": {
        "accessKeyID": {"type": "string", "minLength": 1},
        "secretAccessKey": {"type": "string", "minLength": 1},
        "sessionToken": {"type": "string"}
      }
    },
    "vpcID": {
      "description": "The cells' VPC. With no subnets, the cells use its subnets tagged kipcell.io/cells=true, or all of them, one per zone (the one with the most free addresses).",
      "type": "string",
      "pattern": "^vpc-[0-9a-f]+$"
    },
    "subnets": {
      "description": "The cells' subnets, at most one per zone; the catalog offers their zones.",
      "type": "array",
      "items": {"type": "string", "pattern": "^subnet-[0-9a-f]+$"},
      "uniqueItems": true
    },
    "securityGroups": {
      "description": "Security groups of every cell; a pod's kipcell.io/security-groups are added. The cells need TCP 6421 open to kip.",
      "type": "array",
      "items": {"type": "string", "pattern": "^sg-[0-9a-f]+$"},
      "uniqueItems": true
    },
    "image": {
      "description": "The cells' AMI: by id, or by owner and name (wildcards * and ?; the newest available image wins, chosen at every Configure).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "id": {"type": "string", "pattern": "^ami-[0-9a-f]+$"},
        "owner": {"description": "Account ID, self, amazon or aws-marketplace.", "type": "string"},
        "name": {"type": "string", "minLength": 1}
      },
      "oneOf": [{"required": ["id"]}, {"required": ["owner", "name"]}]
    },
    "instanceProfile": {
      "description": "Default instance profile of cells, a name or an ARN; a pod's kipcell.io/instance-profile replaces it with one of allowedInstanceProfiles.",
      "type": "string"
    },
    "allowedInstanceProfiles": {
      "description": "Instance profiles a pod may name in its kipcell.io/instance-profile annotation, written as the pod writes them (a name or an ARN, compared exactly). Empty, the annotation is refused with an event on the pod; instanceProfile is always allowed. Scope the policy's iam:PassRole to their roles.",
      "type": "array",
      "items": {"type": "string"},
      "uniqueItems": true
    },
    "allowedSecurityGroups": {
      "description": "Security groups a pod may add in its kipcell.io/security-groups annotation. Empty, the annotation is refused with an event on the pod; securityGroups are always allowed.",
      "type": "array",
      "items": {"type": "string", "pattern": "^sg-[0-9a-f]+$"},
      "uniqueItems": true
    },
    "instanceMetadataTags": {
      "description": "Make the instances' tags readable in instance metadata (EC2 MetadataOptions.InstanceMetadataTags). Off by default: the tags name the pod and the cluster.",
      "type": "boolean",
      "default": false
    },
    "podMetadata": {
      "description": "Let pods reach instance metadata through IMDSv2 (hop limit 2 instead of 1, so that token answers reach a pod in its own network namespace). Set it with the boot recipe's KIP_POD_IMDS=1. Off by default: pods then get the instance profile's credentials.",
      "type": "boolean",
      "default": false
    },
    "rootVolumeKMSKeyID": {
      "description": "KMS key that encrypts the cells' root volumes: a key ID, alias/<name>, or the ARN of either. Omitted, EBS's default key of the account and region. Root volumes are always encrypted.",
      "type": "string"
    },
    "tags": {
      "description": "Tags of every instance and root volume, beside kipcell.io/cluster, node, cell, pod-uid and Name (the cell ID, unless set here).",
      "type": "object",
      "additionalProperties": {"type": "string", "maxLength": 256},
      "maxProperties": 45
    },
    "cloudInit": {
      "description": "Path of a cloud-config file (#cloud-config, at most 12 KiB) sent as the first part of the user data: the cell boot recipe, deploy/aws/cloud-init.yaml.",
      "type": "string"
    },
    "rateLimit": {
      "description": "Client-side limit of the plugin's EC2 calls: token buckets for Describe* calls and for calls that change something.",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "describePerSecond": {"type": "number", "exclusiveMinimum": 0, "default": 10},
        "mutatePerSecond": {"type": "number", "exclusiveMinimum": 0, "default": 5},
        "burst": {"type": "integer", "minimum": 1, "default": 20}
      }
    },
    "identity": {
      "description": "The check of a joining cell's signed instance identity document (capability instance-identity). Without certificates no identity is checked: cells join with their bootstrap's token alone.",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "certificates": {"description": "Path of a PEM file of AWS's public RSA certificates for instance identity signatures, one per region in use (EC2 User Guide, AWS public certificates).", "type": "string"},
        "accountIDs": {"description": "The AWS accounts a cell's instance may be in; empty: any.", "type": "array", "items": {"type": "string", "pattern": "^[0-9]{12}$"}}
      }
    }
  }
}`
