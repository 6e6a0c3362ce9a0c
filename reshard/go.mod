module github.com/scatterkit/scatterkit/reshard

go 1.26.0

require (
	github.com/scatterkit/scatterkit/bufferpool v0.0.0
	github.com/scatterkit/scatterkit/costmodel v0.0.0
	github.com/scatterkit/scatterkit/planfmt v0.0.0
	github.com/scatterkit/scatterkit/verbs v0.0.0
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.50.0 // indirect
