# Convenience targets. The README's two commands work without make.
GO ?= go

.PHONY: test generate lint bench bench-foundation check-arch

test: ## every check and test (what CI runs)
	bash scripts/test.sh

generate: ## regenerate bufferpool/pack/pack_gen.go with packgen
	cd bufferpool && $(GO) generate ./...

lint: ## formatting, vet, architecture graph
	@test -z "$$(gofmt -l $$(find . -name '*.go' -not -path './.cache/*'))" || (gofmt -l $$(find . -name '*.go' -not -path './.cache/*'); exit 1)
	$(GO) vet work
	bash scripts/check-arch.sh

check-arch: ## docs/architecture.md's module, third-party and package graphs match the imports
	bash scripts/check-arch.sh

bench: bench-foundation ## benchmarks (see docs/benchmarks.md)

bench-foundation: ## the foundation's goals, ratios from one run
	bash scripts/bench-foundation.sh
