//go:build !race

package engram

const raceEnabled = false
