// Package cli is the scatterprof command: flag parsing, attaching to
// running processes or starting a command held at its first instruction,
// following descendants, the live table, JSON lines, the Prometheus
// endpoint and the bench subcommand that measures the profiler against the
// engine's own trace.
package cli
