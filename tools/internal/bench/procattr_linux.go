package bench

import (
	"os/exec"
	"syscall"
)

// setParentDeath has the kernel send the owner SIGTERM if this process
// dies without stopping it (its stdin closing is the other safeguard).
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
