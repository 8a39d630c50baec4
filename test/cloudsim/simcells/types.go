package simcells

// InstanceType is the size of a cloud's instance or machine type: what a
// CellStarter sizes the cells of that type like.
type InstanceType struct {
	Name      string
	VCPUs     int32
	MemoryMiB int64
}
