//go:build ucx

package ucp

/*
#cgo LDFLAGS: -lucp -lucs
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

static ucs_status_t sk_init(ucp_context_h *ctx) {
	ucp_config_t *cfg;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) return st;
	ucp_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_PARAM_FIELD_FEATURES;
	p.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
	st = ucp_init(&p, cfg, ctx);
	ucp_config_release(cfg);
	return st;
}

static ucs_status_t sk_worker(ucp_context_h ctx, ucp_worker_h *w) {
	ucp_worker_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	p.thread_mode = UCS_THREAD_MODE_SINGLE;
	return ucp_worker_create(ctx, &p, w);
}

static ucs_status_t sk_ep(ucp_worker_h w, const void *addr, int peer, ucp_ep_h *ep) {
	ucp_ep_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
	p.address = (const ucp_address_t *)addr;
	p.err_mode = peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
	return ucp_ep_create(w, &p, ep);
}

static ucs_status_t sk_map(ucp_context_h ctx, void *addr, size_t n, int rread, int rwrite, ucp_mem_h *m) {
	ucp_mem_map_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_PROT;
	p.address = addr;
	p.length = n;
	p.prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
		(rread ? UCP_MEM_MAP_PROT_REMOTE_READ : 0) | (rwrite ? UCP_MEM_MAP_PROT_REMOTE_WRITE : 0);
	return ucp_mem_map(ctx, &p, m);
}

// sk_alloc has UCX allocate n bytes and register them, with the remote
// access asked; *addr is where they are.
static ucs_status_t sk_alloc(ucp_context_h ctx, size_t n, int rread, int rwrite, ucp_mem_h *m, void **addr) {
	ucp_mem_map_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
		UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_PROT;
	p.address = NULL;
	p.length = n;
	p.flags = UCP_MEM_MAP_ALLOCATE;
	p.prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
		(rread ? UCP_MEM_MAP_PROT_REMOTE_READ : 0) | (rwrite ? UCP_MEM_MAP_PROT_REMOTE_WRITE : 0);
	ucs_status_t st = ucp_mem_map(ctx, &p, m);
	if (st != UCS_OK) return st;
	ucp_mem_attr_t a;
	memset(&a, 0, sizeof a);
	a.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
	st = ucp_mem_query(*m, &a);
	if (st != UCS_OK || a.length < n) {
		ucp_mem_unmap(ctx, *m);
		return st != UCS_OK ? st : UCS_ERR_NO_MEMORY;
	}
	*addr = a.address;
	return UCS_OK;
}

// sk_status splits a status pointer: 0 with *req set (in flight), or the
// status (UCS_OK: done at once).
static ucs_status_t sk_status(ucs_status_ptr_t p, void **req) {
	*req = NULL;
	if (p == NULL) return UCS_OK;
	if (UCS_PTR_IS_ERR(p)) return UCS_PTR_STATUS(p);
	*req = p;
	return UCS_INPROGRESS;
}

// sk_res is an operation's status and its request (in flight) returned
// by value: a pointer to a Go variable for the request would make cgo
// move the variable to the heap on every call.
typedef struct {
	ucs_status_t st;
	void *req;
} sk_res;

static sk_res sk_res_of(ucs_status_ptr_t p) {
	sk_res r;
	r.st = sk_status(p, &r.req);
	return r;
}

static sk_res sk_get(ucp_ep_h ep, void *buf, size_t n, uint64_t raddr, ucp_rkey_h k) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof p);
	return sk_res_of(ucp_get_nbx(ep, buf, n, raddr, k, &p));
}

static sk_res sk_put(ucp_ep_h ep, const void *buf, size_t n, uint64_t raddr, ucp_rkey_h k) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof p);
	return sk_res_of(ucp_put_nbx(ep, buf, n, raddr, k, &p));
}

static sk_res sk_flush(ucp_ep_h ep) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof p);
	return sk_res_of(ucp_ep_flush_nbx(ep, &p));
}

static ucs_status_t sk_close(ucp_ep_h ep, int force, void **req) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof p);
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
	return sk_status(ucp_ep_close_nbx(ep, &p), req);
}

// sk_check returns a request's status, freeing it once it is done.
static ucs_status_t sk_check(void *req) {
	ucs_status_t st = ucp_request_check_status(req);
	if (st != UCS_INPROGRESS) ucp_request_free(req);
	return st;
}

// sk_wr is one work request of a batch: get (op 0) or put (op 1) of len
// bytes between local and the peer's raddr, on ep with key. req and
// status are set by sk_post and sk_poll.
typedef struct {
	ucp_ep_h ep;
	ucp_rkey_h key;
	void *local;
	uint64_t raddr;
	uint64_t len;
	void *req;
	int32_t op;
	int32_t status; // UCS_INPROGRESS while req is in flight
} sk_wr;

// sk_post posts n work requests; each is done at once (status UCS_OK or
// an error) or in flight (UCS_INPROGRESS, req set).
static void sk_post(sk_wr *w, int n) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof p);
	for (int i = 0; i < n; i++) {
		ucs_status_ptr_t r = w[i].op == 0
			? ucp_get_nbx(w[i].ep, w[i].local, w[i].len, w[i].raddr, w[i].key, &p)
			: ucp_put_nbx(w[i].ep, w[i].local, w[i].len, w[i].raddr, w[i].key, &p);
		void *req;
		w[i].status = sk_status(r, &req);
		w[i].req = req;
	}
}

// sk_poll progresses the worker (until it has nothing more to do, at
// most rounds times), then checks the n requests of w still in flight,
// freeing the done ones; it returns how many are done now.
static int sk_poll(ucp_worker_h worker, sk_wr *w, int n, int rounds) {
	for (int i = 0; i < rounds && ucp_worker_progress(worker); i++) {
	}
	int done = 0;
	for (int i = 0; i < n; i++) {
		if (w[i].status != UCS_INPROGRESS) continue;
		ucs_status_t st = ucp_request_check_status(w[i].req);
		if (st == UCS_INPROGRESS) continue;
		ucp_request_free(w[i].req);
		w[i].req = NULL;
		w[i].status = st;
		done++;
	}
	return done;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func fail(call string, st C.ucs_status_t) error {
	return &Error{Call: call, Status: int(st), Text: C.GoString(C.ucs_status_string(st))}
}

// Context is a UCX context with RMA and active messages, configured from
// the environment (UCX_TLS, UCX_NET_DEVICES, ...).
type Context struct{ h C.ucp_context_h }

// NewContext initializes UCX.
func NewContext() (*Context, error) {
	var h C.ucp_context_h
	if st := C.sk_init(&h); st != C.UCS_OK {
		return nil, fail("ucp_init", st)
	}
	return &Context{h: h}, nil
}

// Close releases the context (after its workers and registrations).
func (c *Context) Close() {
	if c.h != nil {
		C.ucp_cleanup(c.h)
		c.h = nil
	}
}

// Worker is a UCX worker, used from one goroutine (or locked thread) at
// a time.
type Worker struct {
	h C.ucp_worker_h
}

// NewWorker creates a worker of c.
func (c *Context) NewWorker() (*Worker, error) {
	var h C.ucp_worker_h
	if st := C.sk_worker(c.h, &h); st != C.UCS_OK {
		return nil, fail("ucp_worker_create", st)
	}
	return &Worker{h: h}, nil
}

// Address returns the worker's address, for a peer's Connect.
func (w *Worker) Address() ([]byte, error) {
	var a *C.ucp_address_t
	var n C.size_t
	if st := C.ucp_worker_get_address(w.h, &a, &n); st != C.UCS_OK {
		return nil, fail("ucp_worker_get_address", st)
	}
	defer C.ucp_worker_release_address(w.h, a)
	return C.GoBytes(unsafe.Pointer(a), C.int(n)), nil
}

// Progress advances the worker's communication; it returns how many
// events it handled.
func (w *Worker) Progress() int { return int(C.ucp_worker_progress(w.h)) }

// EventFD returns a file descriptor that becomes readable when the worker
// has events to progress, once armed (Arm): a progress thread with nothing
// in flight sleeps on it instead of spinning, and still serves what its
// peers' operations need of it (over tcp UCX's one-sided operations are
// messages its worker handles).
func (w *Worker) EventFD() (int, error) {
	var fd C.int
	if st := C.ucp_worker_get_efd(w.h, &fd); st != C.UCS_OK {
		return -1, fail("ucp_worker_get_efd", st)
	}
	return int(fd), nil
}

// Arm arms the event descriptor for the next event; busy means events are
// pending now (progress first, then arm again) and the descriptor is not
// armed.
func (w *Worker) Arm() (busy bool, err error) {
	switch st := C.ucp_worker_arm(w.h); st {
	case C.UCS_OK:
		return false, nil
	case C.UCS_ERR_BUSY:
		return true, nil
	default:
		return false, fail("ucp_worker_arm", st)
	}
}

// Close destroys the worker (after its endpoints).
func (w *Worker) Close() {
	if w.h != nil {
		C.ucp_worker_destroy(w.h)
		w.h = nil
	}
}

// Endpoint is a connection from a worker to a peer's worker.
type Endpoint struct {
	h C.ucp_ep_h
	w *Worker
	// PeerFailure reports whether UCX fails the endpoint's operations
	// when the peer dies (UCP_ERR_HANDLING_MODE_PEER). The shared-memory
	// transports cannot: over them an endpoint is made without it, and a
	// dead peer is for the caller's deadlines to find.
	PeerFailure bool
}

// Connect creates an endpoint to the worker at addr (its Address), with
// peer failure handling where the transports UCX selects offer it. UCX
// parses addr without validating it (as it does a packed key in
// UnpackKey): a malformed one from a hostile peer may crash the process,
// so the transport over this must take both only from a peer it admitted,
// through a handshake that checks their framing, and treat what UCX then
// does with them as UCX's trust boundary (a known limit of building on
// it; not tested here with garbage, which would abort the test process).
func (w *Worker) Connect(addr []byte) (*Endpoint, error) {
	if len(addr) == 0 {
		return nil, &Error{Call: "ucp_ep_create", Status: -1, Text: "empty worker address"}
	}
	ca := C.CBytes(addr)
	defer C.free(ca)
	var h C.ucp_ep_h
	st := C.sk_ep(w.h, ca, 1, &h)
	if st == C.UCS_ERR_UNREACHABLE {
		// No transport to the peer handles peer failures (shared memory):
		// without that mode, if one reaches it at all.
		if st = C.sk_ep(w.h, ca, 0, &h); st == C.UCS_OK {
			return &Endpoint{h: h, w: w}, nil
		}
	}
	if st != C.UCS_OK {
		return nil, fail("ucp_ep_create", st)
	}
	return &Endpoint{h: h, w: w, PeerFailure: true}, nil
}

// Request is an operation in flight (zero: none, it completed at once).
type Request struct{ p unsafe.Pointer }

// Pending reports whether r is still to be polled.
func (r Request) Pending() bool { return r.p != nil }

// Check polls r: done (and freed) or not yet; a done request's error is
// the operation's.
func (w *Worker) Check(r *Request) (done bool, err error) {
	if r.p == nil {
		return true, nil
	}
	st := C.sk_check(r.p)
	if st == C.UCS_INPROGRESS {
		return false, nil
	}
	r.p = nil
	if st != C.UCS_OK {
		return true, fail("request", st)
	}
	return true, nil
}

// Wait progresses the worker until r completes.
func (w *Worker) Wait(r *Request) error {
	for {
		done, err := w.Check(r)
		if done {
			return err
		}
		w.Progress()
	}
}

func (e *Endpoint) op(call string, st C.ucs_status_t, req unsafe.Pointer) (Request, error) {
	switch st {
	case C.UCS_OK:
		return Request{}, nil
	case C.UCS_INPROGRESS:
		return Request{p: req}, nil
	}
	return Request{}, fail(call, st)
}

// Get reads n bytes at the peer's address raddr (within memory key
// covers) into local. local must stay in place until the request is done.
func (e *Endpoint) Get(local unsafe.Pointer, n int, raddr uint64, key *RKey) (Request, error) {
	r := C.sk_get(e.h, local, C.size_t(n), C.uint64_t(raddr), key.h)
	return e.op("ucp_get_nbx", r.st, r.req)
}

// Put writes n bytes of local at the peer's address raddr.
func (e *Endpoint) Put(local unsafe.Pointer, n int, raddr uint64, key *RKey) (Request, error) {
	r := C.sk_put(e.h, local, C.size_t(n), C.uint64_t(raddr), key.h)
	return e.op("ucp_put_nbx", r.st, r.req)
}

// Flush completes every operation posted on the endpoint (at the peer).
func (e *Endpoint) Flush() (Request, error) {
	r := C.sk_flush(e.h)
	return e.op("ucp_ep_flush_nbx", r.st, r.req)
}

// Close starts closing the endpoint: with force (on an endpoint with
// PeerFailure; UCX allows it only there) at once, dropping what is in
// flight; otherwise after flushing it, which needs the peer's worker to
// take the flush (a peer in this process must be progressed meanwhile).
// The returned request is polled on the endpoint's worker (Check, Wait).
func (e *Endpoint) Close(force bool) (Request, error) {
	if e.h == nil {
		return Request{}, nil
	}
	var req unsafe.Pointer
	f := C.int(0)
	if force && e.PeerFailure {
		f = 1
	}
	st := C.sk_close(e.h, f, &req)
	e.h = nil
	return e.op("ucp_ep_close_nbx", st, req)
}

// Mem is memory registered with the context.
type Mem struct {
	h   C.ucp_mem_h
	ctx *Context
	n   int
}

// Map registers [p, p+n) with c, for local access and the remote access
// asked (remoteRead, remoteWrite): where the fabric enforces keys (verbs:
// the adapter checks every access against the registration), a peer's
// operation the registration does not allow fails there. UCX's software
// one-sided operations (over tcp and shared memory) check nothing.
func (c *Context) Map(p unsafe.Pointer, n int, remoteRead, remoteWrite bool) (*Mem, error) {
	if p == nil || n <= 0 {
		return nil, &Error{Call: "ucp_mem_map", Status: -1, Text: fmt.Sprintf("%d bytes at %p", n, p)}
	}
	var h C.ucp_mem_h
	if st := C.sk_map(c.h, p, C.size_t(n), cbool(remoteRead), cbool(remoteWrite), &h); st != C.UCS_OK {
		return nil, fail("ucp_mem_map", st)
	}
	return &Mem{h: h, ctx: c, n: n}, nil
}

// Alloc has UCX allocate n bytes and registers them like Map: on one host
// the memory then comes from a segment UCX's shared-memory transports can
// map (sysv, posix), so a peer's gets and puts there are copies rather
// than a system call each (cma). Unmap frees it. The memory is not
// zeroed.
func (c *Context) Alloc(n int, remoteRead, remoteWrite bool) (*Mem, unsafe.Pointer, error) {
	if n <= 0 {
		return nil, nil, &Error{Call: "ucp_mem_map", Status: -1, Text: fmt.Sprintf("allocation of %d bytes", n)}
	}
	var h C.ucp_mem_h
	var p unsafe.Pointer
	if st := C.sk_alloc(c.h, C.size_t(n), cbool(remoteRead), cbool(remoteWrite), &h, &p); st != C.UCS_OK {
		return nil, nil, fail("ucp_mem_map", st)
	}
	return &Mem{h: h, ctx: c, n: n}, p, nil
}

// PackKey returns the remote key of m, for a peer's UnpackKey.
func (m *Mem) PackKey() ([]byte, error) {
	var b unsafe.Pointer
	var n C.size_t
	if st := C.ucp_rkey_pack(m.ctx.h, m.h, &b, &n); st != C.UCS_OK {
		return nil, fail("ucp_rkey_pack", st)
	}
	defer C.ucp_rkey_buffer_release(b)
	return C.GoBytes(b, C.int(n)), nil
}

// Unmap deregisters m.
func (m *Mem) Unmap() error {
	if m.h == nil {
		return nil
	}
	st := C.ucp_mem_unmap(m.ctx.h, m.h)
	m.h = nil
	if st != C.UCS_OK {
		return fail("ucp_mem_unmap", st)
	}
	return nil
}

// RKey is a peer's remote key unpacked for an endpoint.
type RKey struct{ h C.ucp_rkey_h }

// UnpackKey unpacks a peer's packed key for e.
func (e *Endpoint) UnpackKey(packed []byte) (*RKey, error) {
	if len(packed) == 0 {
		return nil, &Error{Call: "ucp_ep_rkey_unpack", Status: -1, Text: "empty key"}
	}
	cb := C.CBytes(packed)
	defer C.free(cb)
	var h C.ucp_rkey_h
	if st := C.ucp_ep_rkey_unpack(e.h, cb, &h); st != C.UCS_OK {
		return nil, fail("ucp_ep_rkey_unpack", st)
	}
	return &RKey{h: h}, nil
}

// Destroy releases k.
func (k *RKey) Destroy() {
	if k.h != nil {
		C.ucp_rkey_destroy(k.h)
		k.h = nil
	}
}

// Op is a one-sided operation of a batch.
type Op int32

const (
	OpGet Op = 0 // read the peer's memory into local
	OpPut Op = 1 // write local into the peer's memory
)

// Batch is work requests posted, and polled, in one call each: never a
// cgo call per request. Its memory is C memory, so UCX may keep the
// requests' handles in it; it holds at most its capacity.
type Batch struct {
	w      *C.sk_wr
	n      int // requests added
	posted int // of them posted
	cap    int
}

// NewBatch returns an empty batch of capacity n (> 0).
func NewBatch(n int) *Batch {
	if n <= 0 {
		n = 1
	}
	w := (*C.sk_wr)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.sk_wr{}))))
	return &Batch{w: w, cap: n}
}

func (b *Batch) slice() []C.sk_wr { return unsafe.Slice(b.w, b.cap) }

// Len is the requests in the batch; Cap its capacity.
func (b *Batch) Len() int { return b.n }
func (b *Batch) Cap() int { return b.cap }

// Add appends a request (false when the batch is full).
func (b *Batch) Add(op Op, e *Endpoint, local unsafe.Pointer, n int, raddr uint64, key *RKey) bool {
	if b.n == b.cap {
		return false
	}
	w := &b.slice()[b.n]
	*w = C.sk_wr{ep: e.h, key: key.h, local: local, raddr: C.uint64_t(raddr), len: C.uint64_t(n), op: C.int32_t(op),
		status: C.UCS_INPROGRESS}
	b.n++
	return true
}

// Post posts the requests added since the last Post, in one call.
func (b *Batch) Post() {
	if b.n > b.posted {
		C.sk_post(&b.slice()[b.posted], C.int(b.n-b.posted))
		b.posted = b.n
	}
}

// Poll progresses w (at most rounds passes while it has work) and takes
// the posted requests that completed since the last Poll, in one call;
// it returns how many did.
func (b *Batch) Poll(w *Worker, rounds int) int {
	return int(C.sk_poll(w.h, b.w, C.int(b.posted), C.int(rounds)))
}

// Status is request i's state: done (with its error) or in flight.
func (b *Batch) Status(i int) (done bool, err error) {
	st := b.slice()[i].status
	switch st {
	case C.UCS_INPROGRESS:
		return false, nil
	case C.UCS_OK:
		return true, nil
	}
	return true, fail("request", C.ucs_status_t(st))
}

// Reset empties a batch whose requests are all done (false, and nothing
// changed, while one is in flight: its handle must be polled first).
func (b *Batch) Reset() bool {
	if b.posted != b.n {
		return false
	}
	for _, w := range b.slice()[:b.n] {
		if w.status == C.UCS_INPROGRESS {
			return false
		}
	}
	b.n, b.posted = 0, 0
	return true
}

// Free releases the batch's memory; its requests must be done (Reset).
func (b *Batch) Free() {
	if b.w != nil {
		C.free(unsafe.Pointer(b.w))
		b.w, b.cap, b.n = nil, 0, 0
	}
}
