package local

// configSchema is the JSON Schema of Config, reported by GetInfo for
// documentation and tooling. Configure remains the authority: it checks
// what a schema cannot (that the agent is executable, that network
// namespaces work). A test keeps the two in step.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "kip-plugin-local configuration",
  "type": "object",
  "additionalProperties": false,
  "required": ["agentCommand"],
  "properties": {
    "agentCommand": {
      "description": "The cell agent's command line. The first element must resolve to an executable; arguments may contain {bootstrap}, {address} and {cellID}.",
      "type": "array",
      "items": {"type": "string"},
      "minItems": 1
    },
    "stateDir": {
      "description": "Directory holding one subdirectory per cell. Default /var/lib/kip/local as root, $XDG_STATE_HOME/kip/local otherwise.",
      "type": "string"
    },
    "network": {
      "description": "netns: a network namespace per cell on a bridge; loopback: a 127.x.y.z address per cell; auto: netns when running as root and network namespaces work, loopback otherwise.",
      "enum": ["auto", "netns", "loopback"],
      "default": "auto"
    },
    "bridge": {
      "description": "Linux bridge the cells' veths join (netns mode); created if missing.",
      "type": "string",
      "pattern": "^[A-Za-z0-9_.-]{1,15}$",
      "default": "kip0"
    },
    "subnet": {
      "description": "Private IPv4 subnet of the cells' network namespaces (netns mode); the bridge gets its first address.",
      "type": "string",
      "default": "10.213.0.0/16"
    },
    "loopbackSubnet": {
      "description": "Subnet of 127.0.0.0/8 cells get addresses from (loopback mode).",
      "type": "string",
      "default": "127.77.0.0/16"
    },
    "zone": {
      "description": "The one zone of the catalog's offerings.",
      "type": "string",
      "default": "local"
    },
    "mountNamespace": {
      "description": "Path of the mount namespace the cells live in (/proc/1/ns/mnt: the machine's, from a pod with hostPID): ip, nsenter and the agents run there, from a copy of the agent in <stateDir>/bin, and stateDir must be the same directory in both. Empty: the plugin's own.",
      "type": "string"
    },
    "masquerade": {
      "description": "netns mode: masquerade what the cells send beyond their subnet (iptables rules of this machine's, and IPv4 forwarding on), so that they reach what the machine reaches.",
      "type": "boolean",
      "default": false
    },
    "terminationGrace": {
      "description": "Time between SIGTERM and SIGKILL when terminating a cell, as a Go duration.",
      "type": "string",
      "default": "5s"
    },
    "instanceTypes": {
      "description": "Replaces the built-in catalog (local.nano to local.xlarge).",
      "type": "array",
      "minItems": 1,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "milliCPU", "memoryMiB"],
        "properties": {
          "name": {"type": "string", "minLength": 1},
          "milliCPU": {"description": "CPU limit in thousandths of a CPU.", "type": "integer", "minimum": 10},
          "memoryMiB": {"description": "Memory limit in MiB.", "type": "integer", "minimum": 16},
          "price": {
            "description": "Nominal hourly price in US dollars: a weight that makes the host prefer the smallest fitting type (local cells cost nothing). Default 0.01 per CPU + 0.005 per GiB.",
            "type": "number",
            "minimum": 0
          }
        }
      }
    }
  }
}`
