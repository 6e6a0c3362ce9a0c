//go:build !race

package frame

// RaceRelease marks a socket write; it does nothing outside race builds
// (see race.go).
func RaceRelease() {}

// RaceAcquire marks a socket read; it does nothing outside race builds.
func RaceAcquire() {}
