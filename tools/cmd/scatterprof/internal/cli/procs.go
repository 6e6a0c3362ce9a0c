package cli

import (
	"bytes"
	"os"
	"strconv"
)

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st, _, ok := parseStat(b)
	return ok && st != 'Z' && st != 'X'
}

// parseStat returns the state and parent pid from /proc/<pid>/stat. The
// command name may hold spaces and parentheses, so fields are counted from
// its last ')'.
func parseStat(b []byte) (state byte, ppid int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	p, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], p, true
}

// children returns the processes whose parent is in the set, found by one
// scan of /proc.
func children(parents map[int]bool) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || parents[pid] {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		if _, pp, ok := parseStat(b); ok && parents[pp] {
			out = append(out, pid)
		}
	}
	return out, nil
}

func selfPID() int { return os.Getpid() }
