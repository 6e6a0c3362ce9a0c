//go:build !linux

package bench

import "os/exec"

// setParentDeath does nothing here: the owner stops when its stdin closes.
func setParentDeath(cmd *exec.Cmd) {}
