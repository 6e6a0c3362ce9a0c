module github.com/scatterkit/scatterkit/structobj

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)
