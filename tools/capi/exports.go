package main

/*
#include <stdint.h>
#include <string.h>

typedef struct {
	int32_t code;
	int64_t t, k, id;
	char    msg[1024];
} sk_error;

enum {
	SK_OK       = 0,
	SK_EINVAL   = -1,
	SK_EID      = -2,
	SK_ENOTABLE = -3,
	SK_EEXIST   = -4,
	SK_ECLOSED  = -5,
	SK_EIO      = -6,
	SK_ENOMEM   = -7,
	SK_ENOTSUP  = -8,
};

typedef struct {
	uint64_t       store, cols;
	int64_t        t;
	int32_t        k, id_bits;
	const void    *ids;
	void          *out_base;
	int64_t        out_len, off, tstride, kstride;
	const int64_t *offsets;
} sk_lookup_args;

enum {
	SK_CUDA_HOST   = 1,
	SK_CUDA_STRICT = 2,
	SK_CUDA_ASYNC  = 4,
};

typedef struct {
	uint64_t       dev, cols, stream;
	int64_t        t;
	int32_t        k, id_bits;
	uint64_t       ids, out;
	int64_t        out_len, off, tstride, kstride;
	const int64_t *offsets;
} sk_cuda_lookup_args;
*/
import "C"

import (
	"errors"
	"unsafe"
)

func main() {}

// abiVersion is sk_abi_version's answer.
const abiVersion = 1

// Compile-time checks: cError is sk_error, code values are the enum's.
var ce C.sk_error

var (
	_ [unsafe.Sizeof(ce) - unsafe.Sizeof(cError{})]byte
	_ [unsafe.Sizeof(cError{}) - unsafe.Sizeof(ce)]byte
	_ [unsafe.Offsetof(ce.t) - unsafe.Offsetof(cError{}.T)]byte
	_ [unsafe.Offsetof(cError{}.T) - unsafe.Offsetof(ce.t)]byte
	_ [unsafe.Offsetof(ce.k) - unsafe.Offsetof(cError{}.K)]byte
	_ [unsafe.Offsetof(cError{}.K) - unsafe.Offsetof(ce.k)]byte
	_ [unsafe.Offsetof(ce.id) - unsafe.Offsetof(cError{}.ID)]byte
	_ [unsafe.Offsetof(cError{}.ID) - unsafe.Offsetof(ce.id)]byte
	_ [unsafe.Offsetof(ce.msg) - unsafe.Offsetof(cError{}.Msg)]byte
	_ [unsafe.Offsetof(cError{}.Msg) - unsafe.Offsetof(ce.msg)]byte
	_ [len(ce.msg) - msgLen]byte
	_ [msgLen - len(ce.msg)]byte
)

const (
	_ = uint8(code(C.SK_OK) - codeOK)
	_ = uint8(codeOK - code(C.SK_OK))
	_ = uint8(code(C.SK_EINVAL) - codeInval)
	_ = uint8(codeInval - code(C.SK_EINVAL))
	_ = uint8(code(C.SK_EID) - codeID)
	_ = uint8(codeID - code(C.SK_EID))
	_ = uint8(code(C.SK_ENOTABLE) - codeNoTable)
	_ = uint8(codeNoTable - code(C.SK_ENOTABLE))
	_ = uint8(code(C.SK_EEXIST) - codeExist)
	_ = uint8(codeExist - code(C.SK_EEXIST))
	_ = uint8(code(C.SK_ECLOSED) - codeClosed)
	_ = uint8(codeClosed - code(C.SK_ECLOSED))
	_ = uint8(code(C.SK_EIO) - codeIO)
	_ = uint8(codeIO - code(C.SK_EIO))
	_ = uint8(code(C.SK_ENOMEM) - codeNoMem)
	_ = uint8(codeNoMem - code(C.SK_ENOMEM))
	_ = uint8(code(C.SK_ENOTSUP) - codeNotSup)
	_ = uint8(codeNotSup - code(C.SK_ENOTSUP))
	_ = uint8(int32(C.SK_CUDA_HOST) - cudaHost)
	_ = uint8(cudaHost - int32(C.SK_CUDA_HOST))
	_ = uint8(int32(C.SK_CUDA_STRICT) - cudaStrict)
	_ = uint8(cudaStrict - int32(C.SK_CUDA_STRICT))
	_ = uint8(int32(C.SK_CUDA_ASYNC) - cudaAsync)
	_ = uint8(cudaAsync - int32(C.SK_CUDA_ASYNC))
)

// ret is every export's return: 0, or err's code with *e filled when e
// is not NULL.
func ret(e *C.sk_error, err error) C.int32_t {
	if err == nil {
		return 0
	}
	if e == nil {
		return C.int32_t(classify(err))
	}
	return C.int32_t((*cError)(unsafe.Pointer(e)).set(err))
}

// goString copies a NUL-terminated C string; NULL is "".
func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

//export sk_abi_version
func sk_abi_version() C.int32_t { return abiVersion }

//export sk_open
func sk_open(config_json *C.char, store *C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if config_json == nil || store == nil {
			return badArg("config_json", "NULL config or store pointer")
		}
		cfg := unsafe.Slice((*byte)(unsafe.Pointer(config_json)), C.strlen(config_json))
		h, e := open(cfg)
		if e == nil {
			*store = C.uint64_t(h)
		}
		return e
	}))
}

//export sk_close
func sk_close(store C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return closeStore(uint64(store)) }))
}

//export sk_table_spec
func sk_table_spec(store C.uint64_t, name *C.char, num_rows *C.int64_t, row_bytes *C.int64_t, populated *C.int32_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		spec, pop, e := tableSpec(uint64(store), goString(name))
		if e != nil {
			return e
		}
		if num_rows != nil {
			*num_rows = C.int64_t(spec.NumRows)
		}
		if row_bytes != nil {
			*row_bytes = C.int64_t(spec.RowBytes)
		}
		if populated != nil {
			*populated = 0
			if pop {
				*populated = 1
			}
		}
		return nil
	}))
}

//export sk_remove
func sk_remove(store C.uint64_t, name *C.char, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return remove(uint64(store), goString(name)) }))
}

//export sk_populate
func sk_populate(store C.uint64_t, name *C.char, rows unsafe.Pointer, len C.int64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return populate(uint64(store), goString(name), rows, int64(len)) }))
}

//export sk_populate_begin
func sk_populate_begin(store C.uint64_t, name *C.char, writer *C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if writer == nil {
			return badArg("writer", "NULL")
		}
		h, e := beginPopulate(uint64(store), goString(name))
		if e == nil {
			*writer = C.uint64_t(h)
		}
		return e
	}))
}

//export sk_populate_write
func sk_populate_write(writer C.uint64_t, p unsafe.Pointer, len C.int64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return writePopulate(uint64(writer), p, int64(len)) }))
}

//export sk_populate_commit
func sk_populate_commit(writer C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return commitPopulate(uint64(writer)) }))
}

//export sk_populate_abort
func sk_populate_abort(writer C.uint64_t) C.int32_t {
	return ret(nil, protect(func() error { return abortPopulate(uint64(writer)) }))
}

//export sk_columns
func sk_columns(store C.uint64_t, names *C.char, k C.int32_t, cols *C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if cols == nil {
			return badArg("cols", "NULL")
		}
		h, e := newColumns(uint64(store), unsafe.Pointer(names), int32(k))
		if e == nil {
			*cols = C.uint64_t(h)
		}
		return e
	}))
}

//export sk_columns_free
func sk_columns_free(cols C.uint64_t) C.int32_t {
	return ret(nil, protect(func() error { return freeColumns(uint64(cols)) }))
}

// argsOf is a lookup's arguments as the Go side takes them, whichever
// export (sk_lookup, sk_lookupv, sk_bench_lookup) received them.
func argsOf(store, cols C.uint64_t, t C.int64_t, k C.int32_t, ids unsafe.Pointer, id_bits C.int32_t,
	out_base unsafe.Pointer, out_len, off, tstride, kstride C.int64_t, offsets *C.int64_t) lookupArgs {
	return lookupArgs{store: uint64(store), cols: uint64(cols), t: int64(t), k: int32(k), ids: ids, idBits: int32(id_bits),
		out: out_base, outLen: int64(out_len), off: int64(off), tStride: int64(tstride), kStride: int64(kstride),
		offsets: unsafe.Pointer(offsets)}
}

//export sk_lookup
func sk_lookup(store C.uint64_t, cols C.uint64_t, t C.int64_t, k C.int32_t,
	ids unsafe.Pointer, id_bits C.int32_t,
	out_base unsafe.Pointer, out_len C.int64_t, off C.int64_t,
	tstride C.int64_t, kstride C.int64_t,
	offsets *C.int64_t, err *C.sk_error) C.int32_t {
	a := argsOf(store, cols, t, k, ids, id_bits, out_base, out_len, off, tstride, kstride, offsets)
	return ret(err, protect(func() error { return lookup(&a) }))
}

//export sk_buffer_new
func sk_buffer_new(store C.uint64_t, n C.int64_t, buf *C.uint64_t, ptr *unsafe.Pointer, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if buf == nil || ptr == nil {
			return badArg("buf", "NULL buf or ptr")
		}
		h, p, e := newBuffer(uint64(store), int64(n))
		if e == nil {
			*buf, *ptr = C.uint64_t(h), p
		}
		return e
	}))
}

//export sk_buffer_free
func sk_buffer_free(buf C.uint64_t) C.int32_t {
	return ret(nil, protect(func() error { return freeBuffer(uint64(buf)) }))
}

//export sk_serve
func sk_serve(store C.uint64_t, transport *C.char, addr *C.char,
	bound *C.char, bound_len C.int32_t, server *C.uint64_t, err *C.sk_error) C.int32_t {
	return serveExport(store, transport, addr, nil, bound, bound_len, server, err)
}

//export sk_serve_publish
func sk_serve_publish(store C.uint64_t, transport *C.char, addr *C.char, directory *C.char,
	bound *C.char, bound_len C.int32_t, server *C.uint64_t, err *C.sk_error) C.int32_t {
	return serveExport(store, transport, addr, directory, bound, bound_len, server, err)
}

func serveExport(store C.uint64_t, transport *C.char, addr *C.char, directory *C.char,
	bound *C.char, bound_len C.int32_t, server *C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if server == nil {
			return badArg("server", "NULL")
		}
		if bound != nil && bound_len < 1 {
			return badArg("bound_len", "%d: no room for the NUL", bound_len)
		}
		h, a, e := serve(uint64(store), goString(transport), goString(addr), goString(directory))
		if e != nil {
			return e
		}
		if bound != nil {
			if len(a) >= int(bound_len) {
				return errors.Join(badArg("bound_len", "%d bytes, the address %q needs %d", bound_len, a, len(a)+1), closeServer(h))
			}
			b := unsafe.Slice((*byte)(unsafe.Pointer(bound)), int(bound_len))
			b[copy(b, a)] = 0
		}
		*server = C.uint64_t(h)
		return nil
	}))
}

//export sk_server_close
func sk_server_close(server C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return closeServer(uint64(server)) }))
}

//export sk_lookupv
func sk_lookupv(args *C.sk_lookup_args, err *C.sk_error) C.int32_t {
	if args == nil {
		return ret(err, badArg("args", "NULL"))
	}
	la := argsOf(args.store, args.cols, args.t, args.k, unsafe.Pointer(args.ids), args.id_bits, args.out_base,
		args.out_len, args.off, args.tstride, args.kstride, args.offsets)
	return ret(err, protect(func() error { return lookup(&la) }))
}

//export sk_bench_lookup
func sk_bench_lookup(store C.uint64_t, cols C.uint64_t, t C.int64_t, k C.int32_t,
	ids unsafe.Pointer, id_bits C.int32_t,
	out_base unsafe.Pointer, out_len C.int64_t, off C.int64_t,
	tstride C.int64_t, kstride C.int64_t,
	offsets *C.int64_t, n C.int64_t, ns *C.int64_t, err *C.sk_error) C.int32_t {
	a := argsOf(store, cols, t, k, ids, id_bits, out_base, out_len, off, tstride, kstride, offsets)
	return ret(err, protect(func() error {
		d, e := benchLookup(&a, int64(n))
		if e == nil && ns != nil {
			*ns = C.int64_t(d.Nanoseconds())
		}
		return e
	}))
}

//export sk_cuda_available
func sk_cuda_available(devices *C.int32_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if devices == nil {
			return badArg("devices", "NULL")
		}
		n, e := cudaAvailable()
		*devices = C.int32_t(n)
		return e
	}))
}

//export sk_cuda_attach
func sk_cuda_attach(store C.uint64_t, device C.int32_t, flags C.int32_t, dev *C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		if dev == nil {
			return badArg("dev", "NULL")
		}
		h, e := attach(uint64(store), int32(device), int32(flags))
		if e == nil {
			*dev = C.uint64_t(h)
		}
		return e
	}))
}

//export sk_cuda_detach
func sk_cuda_detach(dev C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return detach(uint64(dev)) }))
}

//export sk_cuda_warmup
func sk_cuda_warmup(dev C.uint64_t, stream C.uint64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return warmup(uint64(dev), uint64(stream)) }))
}

// deviceArgsOf converts a device lookup's C arguments, once for
// sk_cuda_lookup, sk_cuda_lookupv and sk_cuda_bench_graph (as argsOf
// does for the host lookups).
func deviceArgsOf(dev, cols, stream C.uint64_t, t C.int64_t, k C.int32_t, ids C.uint64_t, id_bits C.int32_t,
	out C.uint64_t, out_len, off, tstride, kstride C.int64_t, offsets *C.int64_t) deviceLookupArgs {
	return deviceLookupArgs{dev: uint64(dev), cols: uint64(cols), stream: uint64(stream), t: int64(t), k: int32(k),
		ids: uint64(ids), idBits: int32(id_bits), out: uint64(out), outLen: int64(out_len), off: int64(off),
		tStride: int64(tstride), kStride: int64(kstride), offsets: unsafe.Pointer(offsets)}
}

//export sk_cuda_lookup
func sk_cuda_lookup(dev C.uint64_t, cols C.uint64_t, stream C.uint64_t, t C.int64_t, k C.int32_t,
	ids C.uint64_t, id_bits C.int32_t,
	out C.uint64_t, out_len C.int64_t, off C.int64_t,
	tstride C.int64_t, kstride C.int64_t,
	offsets *C.int64_t, err *C.sk_error) C.int32_t {
	a := deviceArgsOf(dev, cols, stream, t, k, ids, id_bits, out, out_len, off, tstride, kstride, offsets)
	return ret(err, protect(func() error { return deviceLookup(&a) }))
}

//export sk_cuda_status
func sk_cuda_status(dev C.uint64_t, stream C.uint64_t, k C.int32_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error { return status(uint64(dev), uint64(stream), int32(k)) }))
}

//export sk_cuda_bench_graph
func sk_cuda_bench_graph(dev C.uint64_t, cols C.uint64_t, stream C.uint64_t, t C.int64_t, k C.int32_t,
	ids C.uint64_t, id_bits C.int32_t,
	out C.uint64_t, out_len C.int64_t, off C.int64_t,
	tstride C.int64_t, kstride C.int64_t,
	offsets *C.int64_t, n C.int64_t, ns *C.int64_t, err *C.sk_error) C.int32_t {
	a := deviceArgsOf(dev, cols, stream, t, k, ids, id_bits, out, out_len, off, tstride, kstride, offsets)
	return ret(err, protect(func() error {
		d, e := benchGraph(&a, int64(n))
		if e == nil && ns != nil {
			*ns = C.int64_t(d.Nanoseconds())
		}
		return e
	}))
}

//export sk_cuda_lookupv
func sk_cuda_lookupv(args *C.sk_cuda_lookup_args, err *C.sk_error) C.int32_t {
	if args == nil {
		return ret(err, badArg("args", "NULL"))
	}
	a := deviceArgsOf(args.dev, args.cols, args.stream, args.t, args.k, args.ids, args.id_bits, args.out,
		args.out_len, args.off, args.tstride, args.kstride, args.offsets)
	return ret(err, protect(func() error { return deviceLookup(&a) }))
}

//export sk_cuda_bench_replay
func sk_cuda_bench_replay(dev C.uint64_t, exec C.uint64_t, stream C.uint64_t, n C.int64_t, ns *C.int64_t, err *C.sk_error) C.int32_t {
	return ret(err, protect(func() error {
		d, e := benchReplay(uint64(dev), uint64(exec), uint64(stream), int64(n))
		if e == nil && ns != nil {
			*ns = C.int64_t(d.Nanoseconds())
		}
		return e
	}))
}
