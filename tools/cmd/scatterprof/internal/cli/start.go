package cli

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// startGated starts cmd held at its first instruction: the child asks to
// be traced, so it stops right after exec; attach runs while it is stopped
// and the child is released (untraced) whatever attach returns. Nothing
// the target does escapes the probes, not even its runtime's start.
func startGated(cmd *exec.Cmd, attach func(pid int) error) (attachErr, err error) {
	// The tracer is this OS thread: keep the goroutine on it from fork to
	// detach.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("wait for %d to stop after exec: %w", pid, err)
		}
		break
	}
	if !ws.Stopped() {
		return nil, fmt.Errorf("process %d ended before it ran (status %#x)", pid, uint32(ws))
	}
	attachErr = attach(pid)
	if err := syscall.PtraceDetach(pid); err != nil {
		_ = cmd.Process.Kill()
		return attachErr, fmt.Errorf("release process %d: %w", pid, err)
	}
	return attachErr, nil
}
