package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultPollInterval is how often a File watch looks for changes made by
// other processes and for owners that died.
const DefaultPollInterval = 100 * time.Millisecond

// closeTimeout bounds the wait for the file lock in the Close methods, which
// take no context: a process that holds the lock that long is stuck.
const closeTimeout = 10 * time.Second

// File is a Directory shared by the processes of one host through one
// directory file (see "# Format" in the package documentation). Each record
// holds the identity of its owner process (pid, start time, boot id, pid
// namespace); a record whose process is gone is ignored by every reader and
// dropped by the next writer, so a killed owner's records disappear without
// anyone cleaning up. Writers take an exclusive flock on the lock file
// (path + ".lock") for each read-modify-write and replace the directory file
// atomically (temporary file + rename); readers take no lock.
//
// All processes sharing a file must see the same /proc: a record held by a
// process of another pid namespace is treated as live, since its liveness
// cannot be checked. A handle dropped without Close leaves its records until
// its process exits. The file is only ever replaced, never written in place;
// do not edit it in place while it is in use.
//
// Keep the file on a tmpfs (under /run or /dev/shm): its records only mean
// something for the current boot, and replacing a file by rename costs a
// data flush on disk file systems (about ten times slower here on ext4).
type File struct {
	path     string
	lockPath string
	poll     time.Duration
	self     holder // this process; ID empty
	ops      fileOps

	mu       sync.Mutex
	closed   bool
	done     chan struct{} // closed by Close
	regs     map[string]*fileReg
	watchers map[chan struct{}]string

	cacheMu sync.Mutex
	cache   fileCache
}

var _ Directory = (*File)(nil)

// fileCache is the directory file as last read. Holding it open pins its
// inode, so while the path still names the same device and inode, the file
// has not been replaced and doc is current (writers never write in place).
type fileCache struct {
	f        *os.File // nil: no cached file
	dev, ino uint64
	doc      *fileDoc
}

// fileOps is the I/O of a write, a seam for tests to inject failures.
type fileOps struct {
	createTemp func(dir, pattern string) (tempFile, error)
	rename     func(oldpath, newpath string) error
	remove     func(name string) error
}

type tempFile interface {
	io.Writer
	Name() string
	Chmod(fs.FileMode) error
	Close() error
}

var osFileOps = fileOps{
	createTemp: func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) },
	rename:     os.Rename,
	remove:     os.Remove,
}

// FileOption configures NewFile.
type FileOption func(*File)

// WithPollInterval sets how often watches look for changes made by other
// processes (DefaultPollInterval when d <= 0).
func WithPollInterval(d time.Duration) FileOption {
	return func(f *File) {
		if d > 0 {
			f.poll = d
		}
	}
}

// NewFile opens the directory file at path, which need not exist yet (its
// folder must). It returns an error matching ErrNotSupported where process
// identities cannot be read (outside Linux).
func NewFile(path string, opts ...FileOption) (*File, error) {
	if path == "" {
		return nil, errors.New("discovery: empty directory file path")
	}
	self, err := selfHolder()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("discovery: directory file %q: %w", path, err)
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil {
		return nil, fmt.Errorf("discovery: directory file %q: %w", path, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("discovery: directory file %q: parent is not a folder", path)
	}
	f := &File{
		path:     abs,
		lockPath: abs + ".lock",
		poll:     DefaultPollInterval,
		self:     self,
		ops:      osFileOps,
		done:     make(chan struct{}),
		regs:     make(map[string]*fileReg),
		watchers: make(map[chan struct{}]string),
	}
	for _, o := range opts {
		o(f)
	}
	return f, nil
}

// Path returns the absolute path of the directory file.
func (f *File) Path() string { return f.path }

type fileReg struct {
	*regState
	f     *File
	rec   Record
	id    string
	timer *time.Timer
}

// Publish implements Directory. It waits for the file lock until ctx ends.
func (f *File) Publish(ctx context.Context, r Record) (Registration, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec, err := PreparePublish(r, time.Now())
	if err != nil {
		return nil, err
	}
	if err := f.checkOpen(); err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, f.lockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := f.load()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if rec.Expired(now) {
		return nil, &RecordError{Name: rec.Name, Field: "Expires", Reason: "not in the future"}
	}
	next := &fileDoc{Format: fileFormatName, Version: fileFormatVersion, Revision: doc.Revision + 1}
	for _, fr := range doc.Records {
		if !f.live(fr, now) {
			continue // clean records of dead or expired owners
		}
		if fr.Name == rec.Name {
			return nil, &ExistsError{Name: rec.Name, Holder: fr.Record.Clone()}
		}
		next.Records = append(next.Records, fr)
	}
	rec.Revision = next.Revision
	h := f.self
	h.ID = formatRegID(rand.Uint64())
	next.Records = append(next.Records, fileRecord{Record: rec, Holder: h})

	// Register before the write becomes visible, so that a Close racing with
	// this Publish cannot miss it; undo if the write fails.
	reg := &fileReg{regState: newRegState(), f: f, rec: rec, id: h.ID}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, ErrClosed
	}
	f.regs[reg.id] = reg
	f.mu.Unlock()
	if err := f.store(next); err != nil {
		f.mu.Lock()
		delete(f.regs, reg.id)
		f.mu.Unlock()
		return nil, err
	}
	if !rec.Expires.IsZero() {
		f.mu.Lock()
		if f.regs[reg.id] == reg { // else the directory closed meanwhile
			reg.timer = time.AfterFunc(rec.Expires.Sub(now), reg.expire)
		}
		f.mu.Unlock()
	}
	f.notify(rec.Name)
	return reg, nil
}

func (f *File) checkOpen() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return nil
}

// live reports whether fr counts at time now: not expired, holder alive.
func (f *File) live(fr fileRecord, now time.Time) bool {
	return !fr.Expired(now) && (fr.Holder.sameProcess(f.self) || processAlive(fr.Holder, f.self))
}

// load returns the current directory file, from the cache when the path
// still names the cached file. The result is shared: callers must not modify
// it.
func (f *File) load() (*fileDoc, error) {
	f.cacheMu.Lock()
	defer f.cacheMu.Unlock()
	if f.cache.f != nil {
		fi, err := os.Stat(f.path)
		if err == nil {
			if dev, ino, ok := fileID(fi); ok && dev == f.cache.dev && ino == f.cache.ino {
				return f.cache.doc, nil
			}
		}
	}
	f.dropCacheLocked()
	file, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return newFileDoc(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: read directory file: %w", err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("discovery: read directory file: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(file, maxFileSize+1))
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("discovery: read directory file: %w", err)
	}
	doc, err := decodeFile(f.path, data)
	if err != nil {
		file.Close()
		return nil, err
	}
	dev, ino, ok := fileID(fi)
	if !ok {
		file.Close() // cannot tell when it changes: read it every time
		return doc, nil
	}
	f.cache = fileCache{f: file, dev: dev, ino: ino, doc: doc}
	return doc, nil
}

func (f *File) dropCacheLocked() {
	if f.cache.f != nil {
		f.cache.f.Close()
	}
	f.cache = fileCache{}
}

// store replaces the directory file with doc and caches doc as the file's
// content. The caller holds the file lock. On error the file is unchanged and
// no temporary file is left.
func (f *File) store(doc *fileDoc) (err error) {
	slices.SortFunc(doc.Records, func(a, b fileRecord) int { return strings.Compare(a.Name, b.Name) })
	data, err := encodeFile(doc)
	if err != nil {
		return err
	}
	if len(data) > maxFileSize {
		return fmt.Errorf("discovery: directory file would be %d bytes, more than %d: %w", len(data), maxFileSize, ErrFull)
	}
	tmp, err := f.ops.createTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("discovery: write directory file: %w", err)
	}
	defer func() {
		if err != nil {
			f.ops.remove(tmp.Name())
		}
	}()
	n, err := tmp.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.ops.rename(tmp.Name(), f.path)
	}
	if err != nil {
		return fmt.Errorf("discovery: write directory file: %w", err)
	}
	f.pin(doc)
	return nil
}

// pin caches doc as the content of the file just written, so that the next
// read need not decode it again. The caller holds the file lock, so the path
// still names that file. Failing to pin only costs a read later.
func (f *File) pin(doc *fileDoc) {
	f.cacheMu.Lock()
	defer f.cacheMu.Unlock()
	f.dropCacheLocked()
	file, err := os.Open(f.path)
	if err != nil {
		return
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return
	}
	dev, ino, ok := fileID(fi)
	if !ok {
		file.Close()
		return
	}
	f.cache = fileCache{f: file, dev: dev, ino: ino, doc: doc}
}

// notify wakes this handle's watchers whose prefix covers name.
func (f *File) notify(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for wake, prefix := range f.watchers {
		if strings.HasPrefix(name, prefix) {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// Lookup implements Directory.
func (f *File) Lookup(ctx context.Context, name string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := ValidateName(name); err != nil {
		return Record{}, err
	}
	if err := f.checkOpen(); err != nil {
		return Record{}, err
	}
	doc, err := f.load()
	if err != nil {
		return Record{}, err
	}
	i, ok := slices.BinarySearchFunc(doc.Records, name, func(fr fileRecord, name string) int { return strings.Compare(fr.Name, name) })
	if !ok || !f.live(doc.Records[i], time.Now()) {
		return Record{}, fmt.Errorf("lookup %q: %w", name, ErrNotFound)
	}
	return doc.Records[i].Record.Clone(), nil
}

// List implements Directory.
func (f *File) List(ctx context.Context, prefix string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	return f.snapshot(prefix)
}

func (f *File) snapshot(prefix string) ([]Record, error) {
	if err := f.checkOpen(); err != nil {
		return nil, err
	}
	doc, err := f.load()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Record
	for _, fr := range doc.Records { // sorted by name
		if strings.HasPrefix(fr.Name, prefix) && f.live(fr, now) {
			out = append(out, fr.Record.Clone())
		}
	}
	return out, nil
}

// Watch implements Directory. A watch starts no goroutine: it looks at the
// file every poll interval (and at once after a change through this handle),
// checking the owners' liveness each time.
func (f *File) Watch(ctx context.Context, prefix string) (iter.Seq2[Event, error], error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := f.checkOpen(); err != nil {
		return nil, err
	}
	return func(yield func(Event, error) bool) {
		wake := make(chan struct{}, 1)
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			yield(Event{}, ErrClosed)
			return
		}
		f.watchers[wake] = prefix
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.watchers, wake)
			f.mu.Unlock()
		}()
		snapshotWatch{snapshot: f.snapshot, closed: f.done, wake: wake, poll: f.poll}.run(ctx, prefix, yield)
	}, nil
}

// Close implements Directory. It withdraws this handle's records in one
// write; if that write fails, the error is returned and the records stay in
// the file until this process exits (readers then drop them). Either way the
// handle is closed.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	close(f.done)
	regs := f.regs
	f.regs = nil
	f.mu.Unlock()

	var err error
	if len(regs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		err = f.withdraw(ctx, regs)
		cancel()
	}
	for _, reg := range regs {
		if reg.timer != nil {
			reg.timer.Stop()
		}
		reg.finish(ErrClosed)
	}
	f.cacheMu.Lock()
	f.dropCacheLocked()
	f.cacheMu.Unlock()
	return err
}

// withdraw removes the records of regs (keyed by registration id) from the
// file, with the records of dead owners.
func (f *File) withdraw(ctx context.Context, regs map[string]*fileReg) error {
	unlock, err := lockFile(ctx, f.lockPath)
	if err != nil {
		return err
	}
	defer unlock()
	doc, err := f.load()
	if err != nil {
		return err
	}
	now := time.Now()
	next := &fileDoc{Format: fileFormatName, Version: fileFormatVersion, Revision: doc.Revision}
	changed := false
	for _, fr := range doc.Records {
		_, mine := regs[fr.Holder.ID]
		if (mine && fr.Holder.sameProcess(f.self)) || !f.live(fr, now) {
			changed = true
			continue
		}
		next.Records = append(next.Records, fr)
	}
	if !changed {
		return nil
	}
	if err := f.store(next); err != nil {
		return err
	}
	for _, reg := range regs {
		f.notify(reg.rec.Name)
	}
	return nil
}

// Record implements Registration.
func (r *fileReg) Record() Record { return r.rec.Clone() }

// Close implements Registration.
func (r *fileReg) Close() error {
	f := r.f
	f.mu.Lock()
	if f.regs[r.id] != r {
		f.mu.Unlock()
		return nil // already ended: withdrawn, expired, or the directory closed
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := f.withdraw(ctx, map[string]*fileReg{r.id: r}); err != nil {
		return err
	}
	f.mu.Lock()
	ended := f.regs[r.id] == r
	if ended {
		delete(f.regs, r.id)
		if r.timer != nil {
			r.timer.Stop()
		}
	}
	f.mu.Unlock()
	if ended {
		r.finish(ErrWithdrawn)
	}
	return nil
}

// expire ends the registration when its record expires; the record itself is
// already invisible to readers and the next writer drops it.
func (r *fileReg) expire() {
	f := r.f
	f.mu.Lock()
	ended := f.regs[r.id] == r
	if ended {
		delete(f.regs, r.id)
	}
	f.mu.Unlock()
	if ended {
		r.finish(ErrExpired)
		f.notify(r.rec.Name)
	}
}
