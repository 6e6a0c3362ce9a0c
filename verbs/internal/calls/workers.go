package calls

import "sync"

// Workers runs jobs on goroutines that outlive them. A job goes to an
// idle worker when there is one and starts a new worker otherwise, so
// jobs never wait for each other (a slow handler blocks no other call),
// while a steady stream of them starts no goroutine: a go statement with
// arguments allocates its closure, and a warm call path must not.
//
// Up to Keep workers stay parked between jobs; they all exit once Stop is
// closed, and every worker is counted in WG (Add before it starts, Done
// when it exits), so waiting on WG after Stop waits for every job.
type Workers[J any] struct {
	Run  func(J)         // runs one job
	Stop <-chan struct{} // closed: parked workers exit
	WG   *sync.WaitGroup // counts the workers
	Keep int             // most workers parked at once (at least 1)

	mu     sync.Mutex
	parked []chan J // LIFO: the most recently parked worker runs the next job
}

// Go runs j on a parked worker, or on a new one.
func (w *Workers[J]) Go(j J) {
	w.mu.Lock()
	if n := len(w.parked); n > 0 {
		ch := w.parked[n-1]
		w.parked[n-1] = nil
		w.parked = w.parked[:n-1]
		w.mu.Unlock()
		ch <- j // buffered: never blocks
		return
	}
	w.mu.Unlock()
	w.WG.Add(1)
	go w.loop(j)
}

// Parked returns how many workers wait for a job.
func (w *Workers[J]) Parked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.parked)
}

func (w *Workers[J]) loop(j J) {
	defer w.WG.Done()
	ch := make(chan J, 1)
	for {
		w.Run(j)
		if !w.park(ch) {
			return
		}
		select {
		case j = <-ch:
		case <-w.Stop:
			if w.unpark(ch) {
				return
			}
			j = <-ch // Go took this worker first: its job is on the way
		}
	}
}

// park offers ch for the next job; false when the worker should exit
// (enough are parked, or Stop is closed).
func (w *Workers[J]) park(ch chan J) bool {
	select {
	case <-w.Stop:
		return false
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.parked) >= max(w.Keep, 1) {
		return false
	}
	w.parked = append(w.parked, ch)
	return true
}

// unpark withdraws ch; false when Go has already taken it.
func (w *Workers[J]) unpark(ch chan J) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.parked {
		if c == ch {
			last := len(w.parked) - 1
			w.parked[i] = w.parked[last]
			w.parked[last] = nil
			w.parked = w.parked[:last]
			return true
		}
	}
	return false
}
