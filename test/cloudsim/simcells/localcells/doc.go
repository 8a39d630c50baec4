// Package localcells is a simcells.CellStarter backed by the real local
// plugin (kip-plugin-local under host/plugin's Supervisor): every
// simulated instance of ec2sim or gcesim that runs is a local cell whose
// address is the instance's private IP, with its agent held back until
// the simulator lets it start (simcells.AgentStarter) and its instance
// metadata at a socket of its choosing (simcells.IMDSLocator), and with
// Config.Metadata also at 169.254.169.254, off the cell, as its cloud
// serves it (metadata.go; Netns and NetnsPath help tests look into a cell's
// network namespace, with cell/podnet's Do and DialContext). Its instances
// have disks (simcells.DiskStarter, disks.go): the local plugin's, loop
// devices attached to the cell, each linked at its cloud path under a
// directory of the instance's that stands in for its device links
// (kip-cell --disk-path-root).
// BuildPlugin and CheckCell help the simulators' tests that start real
// cells.
//
// This package is test support: it may import the standard library,
// cell/podnet, test/cloudsim/simcells, host/plugin, pluginapi,
// plugins/local (its disks' files, local.CreateVolume and DeleteVolume,
// which no plugin call makes) and testing. The simulators
// themselves do not import it (they see only simcells' interfaces);
// their tests and test/e2e/framework do.
package localcells
