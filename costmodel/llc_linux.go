package costmodel

import (
	"os"
	"strconv"
	"strings"
)

// lastLevelCache reads the size of CPU 0's highest-level cache from sysfs;
// 0 when it cannot be read.
func lastLevelCache() int64 {
	const dir = "/sys/devices/system/cpu/cpu0/cache/"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var bestLevel, bestSize int64
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		level := readSysInt(dir + e.Name() + "/level")
		size := parseCacheSize(readSysString(dir + e.Name() + "/size"))
		if level > bestLevel && size > 0 {
			bestLevel, bestSize = level, size
		}
	}
	return bestSize
}

func readSysString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readSysInt(path string) int64 {
	v, err := strconv.ParseInt(readSysString(path), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
