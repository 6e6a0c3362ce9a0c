//go:build race

package verbstest

const raceEnabled = true
