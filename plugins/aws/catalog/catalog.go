package catalog

import (
	_ "embed"
	"sync"

	apicatalog "github.com/kipcell/kip/pluginapi/catalog"
)

// data is the generated catalog (go run ./catalog/gen writes it).
//
//go:embed aws.json
var data []byte

var load = sync.OnceValues(func() (*apicatalog.Catalog, error) { return apicatalog.Parse(data) })

// Load parses the embedded catalog once and returns it. The catalog is
// shared by every caller: read it, never modify it.
func Load() (*apicatalog.Catalog, error) { return load() }
