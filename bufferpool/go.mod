module github.com/scatterkit/scatterkit/bufferpool

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/scatterkit/scatterkit/planfmt v0.0.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
