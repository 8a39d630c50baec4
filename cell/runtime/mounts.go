package runtime

import specs "github.com/opencontainers/runtime-spec/specs-go"

// bindMounts turns volume mounts into OCI bind mounts: recursive, private,
// read-only when asked.
func bindMounts(mounts []Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(mounts))
	for _, m := range mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{
			Destination: m.Destination, Type: "bind", Source: m.Source,
			Options: []string{"rbind", "rprivate", mode},
		})
	}
	return out
}
