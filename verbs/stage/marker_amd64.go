package stage

// begin and end are implemented in marker_amd64.s: a 5-byte NOP and RET.

//go:noescape
func begin(id, stage uint64)

//go:noescape
func end(id, stage, bytes uint64)

// markerPCs returns the entry addresses of the ABI0 markers (test support).
func markerPCs() (begin, end *byte)
