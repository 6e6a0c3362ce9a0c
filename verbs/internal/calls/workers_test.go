package calls

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// job is a Workers job for the tests: it waits for release (when set)
// and then reports on done.
type job struct {
	release chan struct{}
	done    chan int
	n       int
}

func newWorkers(keep int) (*Workers[*job], chan struct{}, *sync.WaitGroup) {
	stop := make(chan struct{})
	wg := new(sync.WaitGroup)
	w := &Workers[*job]{Stop: stop, WG: wg, Keep: keep, Run: func(j *job) {
		if j.release != nil {
			<-j.release
		}
		j.done <- j.n
	}}
	return w, stop, wg
}

func waitParked(t *testing.T, w *Workers[*job], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.Parked() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers parked, want %d", w.Parked(), n)
		}
		runtime.Gosched()
	}
}

func TestWorkersConcurrent(t *testing.T) {
	w, stop, wg := newWorkers(2)
	done := make(chan int, 8)
	blocked := &job{release: make(chan struct{}), done: done, n: 1}
	w.Go(blocked)
	// A blocked job holds its worker; the next one gets its own.
	w.Go(&job{done: done, n: 2})
	require.Equal(t, 2, <-done)
	close(blocked.release)
	require.Equal(t, 1, <-done)
	waitParked(t, w, 2)
	close(stop)
	wg.Wait()
	require.Zero(t, w.Parked())
}

func TestWorkersKeep(t *testing.T) {
	w, stop, wg := newWorkers(2)
	done := make(chan int, 8)
	release := make(chan struct{})
	for i := range 6 {
		w.Go(&job{release: release, done: done, n: i})
	}
	close(release)
	seen := map[int]bool{}
	for range 6 {
		seen[<-done] = true
	}
	require.Len(t, seen, 6)
	waitParked(t, w, 2) // the other four exited
	close(stop)
	wg.Wait()
}

func TestWorkersAfterStop(t *testing.T) {
	w, stop, wg := newWorkers(1)
	done := make(chan int, 2)
	w.Go(&job{done: done, n: 1})
	require.Equal(t, 1, <-done)
	waitParked(t, w, 1)
	close(stop)
	// A job handed over after Stop still runs, whether its worker was
	// parked or is new.
	w.Go(&job{done: done, n: 2})
	w.Go(&job{done: done, n: 3})
	require.ElementsMatch(t, []int{2, 3}, []int{<-done, <-done})
	wg.Wait()
	require.Zero(t, w.Parked())
}

func TestWorkersAllocs(t *testing.T) {
	w, stop, wg := newWorkers(1)
	defer func() {
		close(stop)
		wg.Wait()
	}()
	j := &job{done: make(chan int, 1), n: 7}
	run := func() {
		w.Go(j)
		if n := <-j.done; n != 7 {
			t.Fatalf("job %d", n)
		}
		waitParked(t, w, 1)
	}
	run()
	require.Zero(t, testing.AllocsPerRun(100, run), "a parked worker took the job")
}
