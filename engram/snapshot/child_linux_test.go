//go:build linux

package snapshot

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Environment of a child process.
const (
	envDir      = "SNAPSHOT_TEST_DIR"      // the table directory
	envName     = "SNAPSHOT_TEST_NAME"     // the table name
	envKey      = "SNAPSHOT_TEST_KEY"      // crash: key of the rows
	envFallback = "SNAPSHOT_TEST_FALLBACK" // crash: "1" to publish without O_TMPFILE
	envSpin     = "SNAPSHOT_TEST_SPIN_NS"  // crash: busy-wait per write call
)

// The crash child's table: small, written in many small chunks so that
// populate takes a few milliseconds of many steps.
var crashSpec = Spec{Name: "crash", NumRows: 1000, RowBytes: 264}

const crashChunk = 4 << 10

// childReport is what the share and nolock children print, as JSON.
type childReport struct {
	Err         string `json:",omitempty"`
	Skip        string `json:",omitempty"`
	RssKB       int64
	SharedKB    int64
	PrivateKB   int64
	Locked      bool
	RequiredErr string
	RequiredPin bool // PinRequired failed with ErrPin
	BestPinErr  bool // PinBestEffort recorded a PinErr matching ErrPin
	BestRowsOK  bool // and its rows verified and readable
}

func runChild(mode string) int {
	switch mode {
	case "crash":
		return childCrash()
	case "share":
		return report(childShare())
	case "nolock":
		return report(childNoLock())
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 2
}

func report(r childReport) int {
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// childCrash creates the crash table, saying "ready" just before and
// "done <ns>" just after, then waits to be killed.
func childCrash() int {
	key, err := strconv.ParseUint(os.Getenv(envKey), 10, 64)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	spin, _ := strconv.ParseInt(os.Getenv(envSpin), 10, 64)
	rows := makeRows(crashSpec, key)
	fsys := &faultFS{inner: OS, noTmpFile: os.Getenv(envFallback) == "1", spin: time.Duration(spin)}
	fmt.Println("ready")
	start := time.Now()
	if err := Create(os.Getenv(envDir), crashSpec, rows, &CreateOptions{FS: fsys, ChunkBytes: crashChunk, BlockBytes: MinBlockBytes}); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("done", time.Since(start).Nanoseconds())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills us or goes away
	return 0
}

// childShare opens the table pinned and reports its mapping's smaps.
func childShare() childReport {
	t, err := Open(os.Getenv(envDir), os.Getenv(envName), nil, &OpenOptions{Pin: PinBestEffort})
	if err != nil {
		return childReport{Err: err.Error()}
	}
	defer t.Close()
	kb, err := smapsOf(unsafe.SliceData(t.Rows))
	if err != nil {
		return childReport{Err: err.Error()}
	}
	return childReport{RssKB: kb["Rss"], SharedKB: kb["Shared_Clean"] + kb["Shared_Dirty"],
		PrivateKB: kb["Private_Clean"] + kb["Private_Dirty"], Locked: t.Locked}
}

// childNoLock takes CAP_IPC_LOCK away from its thread, lowers
// RLIMIT_MEMLOCK to zero and opens the table with PinRequired (which must
// fail with ErrPin) and PinBestEffort (which must fall back).
func childNoLock() childReport {
	// Capabilities are per thread: drop it on this one and run the opens
	// here (a small table is verified on the calling goroutine).
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return childReport{Skip: "capget: " + err.Error()}
	}
	data[0].Effective &^= 1 << unix.CAP_IPC_LOCK
	data[0].Permitted &^= 1 << unix.CAP_IPC_LOCK
	data[0].Inheritable &^= 1 << unix.CAP_IPC_LOCK
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return childReport{Skip: "capset: " + err.Error()}
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return childReport{Skip: "setrlimit: " + err.Error()}
	}
	dir, name := os.Getenv(envDir), os.Getenv(envName)
	var r childReport
	t, err := Open(dir, name, nil, &OpenOptions{Pin: PinRequired})
	if err == nil {
		t.Close()
		r.RequiredErr = "PinRequired succeeded"
	} else {
		r.RequiredErr = err.Error()
		r.RequiredPin = errors.Is(err, ErrPin)
	}
	t, err = Open(dir, name, nil, &OpenOptions{Pin: PinBestEffort})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer t.Close()
	r.Locked = t.Locked
	r.BestPinErr = errors.Is(t.PinErr, ErrPin)
	r.BestRowsOK = t.Verified && len(t.Rows) == int(t.Spec.Size())
	if kb, err := smapsOf(unsafe.SliceData(t.Rows)); err == nil {
		r.RssKB = kb["Rss"]
	}
	return r
}

// smapsOf returns the kB fields of the /proc/self/smaps entry holding addr.
func smapsOf(addr *byte) (map[string]int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := uint64(uintptr(unsafe.Pointer(addr)))
	var kb map[string]int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			if kb != nil {
				return kb, nil // the entry ended
			}
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && start <= a && a < end {
				kb = map[string]int64{}
			}
			continue
		}
		if kb != nil && len(fields) >= 2 && strings.HasSuffix(fields[0], ":") {
			if v, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				kb[strings.TrimSuffix(fields[0], ":")] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if kb == nil {
		return nil, fmt.Errorf("no mapping holds %#x in /proc/self/smaps", a)
	}
	return kb, nil
}
