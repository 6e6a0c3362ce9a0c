module github.com/scatterkit/scatterkit/cudagather

go 1.26.0

require (
	golang.org/x/sys v0.50.0
	gorgonia.org/cu v0.9.6
)

require (
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	// gorgonia.org/cu's requirements reach the 2020 monolithic genproto,
	// which in the workspace collides with the split genproto modules the
	// etcd module uses (ambiguous imports); this newer monolith no longer
	// holds those packages.
	google.golang.org/genproto v0.0.0-20260803160001-6ac0973c030d // indirect
)
