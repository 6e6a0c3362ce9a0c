// Byte-row gather kernels for package cudagather.
//
// One launch gathers a [T,K] array of ids into a [T,K] array of R-byte
// output rows: row (t, k) of the output, at out + t*out_ts + k*out_ks,
// receives row ids[t*id_ts + k*id_ks] - cols[k].offset of column k's
// table. Id -1 leaves its output row untouched. Any other id outside
// [offset, offset + rows) is never read: its row is left untouched too, and
// the launch records the first such id's position in *status (see sk_bad),
// so the host can report it.
//
// The kernels take one argument, a parameter block by value (kernel
// parameter space, at most 4 KiB), sized for 8 or 64 columns (suffix _c8 or
// _c64: a small block is cheaper to launch). Launches are captured into
// CUDA graphs with their arguments, so a graph replays the same lookup on
// whatever ids the id buffer holds at replay time.
//
// Work split: a warp takes 32/G rows per step, G lanes per row, and ROWS
// steps at a time; within a row, lanes copy consecutive words of type V
// (16, 8 or 4 bytes: the widest every address and stride allows), at most
// MAXW per lane. Every lane issues all its loads before its first store:
// with rows this small and this random, memory-level parallelism is what
// decides the speed. Rows of 16k+8 bytes at 8-byte aligned addresses
// (264 = 16*16+8) are read as aligned 16-byte chunks plus one 8-byte piece
// and written as 8-byte words (the sk_w8x16 kernels): half the load
// instructions of plain 8-byte words.
//
// Regenerate gather.ptx (committed; the Go package embeds it) with
//   nvcc -arch=sm_90 -ptx -O3 -o gather.ptx gather.cu

// ORD: the ordered variant (suffix _o) visits rows through the ordering
// scratch; the plain kernels carry no trace of it.
template <int MAXC, bool ORD = false>
struct sk_args {
	static const bool ordered = ORD;
	unsigned long long ids;     // device address of id (0, 0)
	unsigned long long out;     // device address of output row (0, 0)
	unsigned long long status;  // device address of an 8-byte status word
	long long t, k;             // shape
	long long id_ts, id_ks;     // id strides, in elements
	long long out_ts, out_ks;   // output strides, in bytes
	long long row_bytes;        // R
	long long id64;             // 1: ids are int64, 0: int32
	unsigned long long order;   // 0, or the device address of the ordering scratch (sk_order_*)
	struct {
		unsigned long long table;  // device address of row 0
		long long rows;            // rows in the table
		long long offset;          // subtracted from ids of this column
	} cols[MAXC];
};

// sk_bad records a bad id at flat index r: the status word holds 0 (none)
// or 2^62 - r of the first bad id in token-major order (atomicMax keeps
// the smallest r).
#define SK_STATUS_BASE (1ULL << 62)
template <class A>
__device__ __forceinline__ void sk_bad(const A& a, long long r) {
	atomicMax((unsigned long long*)a.status, SK_STATUS_BASE - (unsigned long long)r);
}

template <class A>
__device__ __forceinline__ long long sk_id(const A& a, long long ti, long long ki) {
	long long at = ti * a.id_ts + ki * a.id_ks;
	if (a.id64) {
		return __ldg(((const long long*)a.ids) + at);
	}
	return (long long)__ldg(((const int*)a.ids) + at);
}

// Ordered lookups (host tables, many rows). Rows a lookup visits in id
// order are scattered over the whole table, and a host table's pages are
// translated for the device one by one: visited in address order, nearby
// rows share their translations (a 1 GiB table, R=264, N=98,304: 845 us in
// id order, 625 us in address order). Three small kernels bucket the rows
// by where they lie in their column's table (SK_BUCKETS equal slices of
// each table) into the scratch at a.order: counts[SK_BUCKETS] (zeroed by
// the host before the first), cursors[SK_BUCKETS], then perm[t*k], the
// flat row indices in bucket order. The gather then visits perm[i]
// instead of i.
#define SK_BUCKETS 4096

template <class A>
__device__ __forceinline__ unsigned sk_bucket(const A& a, long long r) {
	long long ti = r / a.k, ki = r - ti * a.k;
	long long id = sk_id(a, ti, ki);
	long long row = id - a.cols[ki].offset;
	if (id == -1 || row < 0 || row >= a.cols[ki].rows) {
		return 0;  // read nothing; the gather records bad ids
	}
	return (unsigned)((unsigned long long)row * SK_BUCKETS / (unsigned long long)a.cols[ki].rows);
}

template <class A>
__device__ __forceinline__ void sk_order_count_all(const A& a) {
	unsigned* counts = (unsigned*)a.order;
	const long long n = a.t * a.k;
	if (a.order == 0) return;
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (long long)gridDim.x * blockDim.x) {
		atomicAdd(&counts[sk_bucket(a, r)], 1u);
	}
}

// sk_order_scan_all: one block of 1024 threads turns the counts into
// exclusive prefix sums (the cursors).
template <class A>
__device__ __forceinline__ void sk_order_scan_all(const A& a) {
	if (a.order == 0 || blockDim.x != 1024) return;
	const unsigned* counts = (const unsigned*)a.order;
	unsigned* cursors = (unsigned*)a.order + SK_BUCKETS;
	const int per = SK_BUCKETS / 1024;
	__shared__ unsigned sums[1024];
	unsigned local[per];
	unsigned sum = 0;
#pragma unroll
	for (int i = 0; i < per; i++) {
		local[i] = counts[threadIdx.x * per + i];
		sum += local[i];
	}
	sums[threadIdx.x] = sum;
	__syncthreads();
	for (int d = 1; d < 1024; d <<= 1) {  // inclusive scan of the per-thread sums
		unsigned v = threadIdx.x >= d ? sums[threadIdx.x - d] : 0;
		__syncthreads();
		sums[threadIdx.x] += v;
		__syncthreads();
	}
	unsigned at = sums[threadIdx.x] - sum;
#pragma unroll
	for (int i = 0; i < per; i++) {
		cursors[threadIdx.x * per + i] = at;
		at += local[i];
	}
}

template <class A>
__device__ __forceinline__ void sk_order_place_all(const A& a) {
	unsigned* cursors = (unsigned*)a.order + SK_BUCKETS;
	unsigned* perm = (unsigned*)a.order + 2 * SK_BUCKETS;
	const long long n = a.t * a.k;
	if (a.order == 0) return;
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (long long)gridDim.x * blockDim.x) {
		perm[atomicAdd(&cursors[sk_bucket(a, r)], 1u)] = (unsigned)r;
	}
}

// sk_flat is the flat row the gather visits i-th.
template <class A>
__device__ __forceinline__ long long sk_flat(const A& a, long long i) {
	if (A::ordered) {
		return (long long)__ldg((const unsigned*)a.order + 2 * SK_BUCKETS + i);
	}
	return i;
}

// sk_row resolves flat row r: its source row (or 0 for -1 and bad ids,
// recording the bad ones) and its output row.
template <class A>
__device__ __forceinline__ const unsigned char* sk_row(const A& a, long long r, int lg, unsigned char** dst) {
	long long ti = r / a.k, ki = r - ti * a.k;
	long long id = sk_id(a, ti, ki);
	if (id == -1) {
		return 0;
	}
	long long row = id - a.cols[ki].offset;
	if (row < 0 || row >= a.cols[ki].rows) {
		if (lg == 0) {
			sk_bad(a, r);
		}
		return 0;
	}
	*dst = (unsigned char*)(a.out + ti * a.out_ts + ki * a.out_ks);
	return (const unsigned char*)(a.cols[ki].table + (unsigned long long)row * a.row_bytes);
}

template <typename V, int G, int MAXW, int ROWS, class A>
__device__ __forceinline__ void sk_gather(const A& a) {
	const long long n = a.t * a.k;
	const int wpr = (int)(a.row_bytes / sizeof(V));
	const int lane = threadIdx.x & 31;
	const int sub = lane / G, lg = lane % G;
	const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
	const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	const int per = 32 / G;
	for (long long base = warp * per * ROWS; base < n; base += warps * per * ROWS) {
		V v[ROWS][MAXW];
		V* dst[ROWS];
#pragma unroll
		for (int s = 0; s < ROWS; s++) {
			long long r = base + (long long)s * per + sub;
			dst[s] = 0;
			if (r < n) {
				r = sk_flat(a, r);
				unsigned char* d = 0;
				const V* src = (const V*)sk_row(a, r, lg, &d);
				if (src != 0) {
#pragma unroll
					for (int j = 0; j < MAXW; j++) {
						int w = lg + j * G;
						if (w < wpr) {
							v[s][j] = src[w];
						}
					}
					dst[s] = (V*)d;
				}
			}
		}
#pragma unroll
		for (int s = 0; s < ROWS; s++) {
			if (dst[s] != 0) {
#pragma unroll
				for (int j = 0; j < MAXW; j++) {
					int w = lg + j * G;
					if (w < wpr) {
						dst[s][w] = v[s][j];
					}
				}
			}
		}
	}
}

// sk_gather_8x16: rows of 16c+8 bytes at 8-byte aligned addresses, read
// as c aligned 16-byte chunks and one 8-byte piece (before the chunks when
// the row starts 8 bytes past a 16-byte boundary, else after them).
template <int G, int MAXW, int ROWS, class A>
__device__ __forceinline__ void sk_gather_8x16(const A& a) {
	const long long n = a.t * a.k;
	const int chunks = (int)((a.row_bytes - 8) / 16);
	const int lane = threadIdx.x & 31;
	const int sub = lane / G, lg = lane % G;
	const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
	const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	const int per = 32 / G;
	for (long long base = warp * per * ROWS; base < n; base += warps * per * ROWS) {
		uint4 v[ROWS][MAXW];
		uint2 piece[ROWS];
		unsigned char* dst[ROWS];
		int head[ROWS];
#pragma unroll
		for (int s = 0; s < ROWS; s++) {
			long long r = base + (long long)s * per + sub;
			dst[s] = 0;
			if (r < n) {
				r = sk_flat(a, r);
				unsigned char* d = 0;
				const unsigned char* src = sk_row(a, r, lg, &d);
				if (src != 0) {
					int h = (int)((unsigned long long)src & 8);  // 8: the piece comes first
					const uint4* body = (const uint4*)(src + h);
#pragma unroll
					for (int j = 0; j < MAXW; j++) {
						int w = lg + j * G;
						if (w < chunks) {
							v[s][j] = body[w];
						}
					}
					if (lg == 0) {
						piece[s] = *(const uint2*)(h ? src : src + 16 * chunks);
					}
					head[s] = h;
					dst[s] = d;
				}
			}
		}
#pragma unroll
		for (int s = 0; s < ROWS; s++) {
			if (dst[s] != 0) {
				unsigned char* o = dst[s] + head[s];
#pragma unroll
				for (int j = 0; j < MAXW; j++) {
					int w = lg + j * G;
					if (w < chunks) {
						((uint2*)o)[2 * w] = make_uint2(v[s][j].x, v[s][j].y);
						((uint2*)o)[2 * w + 1] = make_uint2(v[s][j].z, v[s][j].w);
					}
				}
				if (lg == 0) {
					*(uint2*)(head[s] ? dst[s] : dst[s] + 16 * chunks) = piece[s];
				}
			}
		}
	}
}

// sk_gather_flat: rows of W 8-byte words (R = 8W, 8-byte aligned rows and
// outputs) copied as one stream of words, so that no lane idles when W is
// not a power of two (R=136: 17 words, 200: 25, 264: 33). A warp takes
// P = floor(32U/W) rows a step: lanes 0..P-1 resolve one row each (id,
// bounds, addresses), and lane l copies the words l, l+32, ..., l+32(U-1)
// of the step's P*W words, word f being word f%W of row f/W, whose
// addresses it takes from the resolving lane by shuffle. All U loads are
// issued before the first store. The host keeps W <= 32U (P >= 1) and
// P <= 32.
template <int U, class A>
__device__ __forceinline__ void sk_gather_flat(const A& a) {
	const long long n = a.t * a.k;
	const int W = (int)(a.row_bytes >> 3);
	const int P = (32 * U) / W;
	const int lane = threadIdx.x & 31;
	const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
	const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	// Which row of the step and which word of it each of this lane's U
	// words is: the same every step.
	int row[U], word[U];
#pragma unroll
	for (int j = 0; j < U; j++) {
		int f = lane + 32 * j;
		row[j] = f / W;
		word[j] = f - row[j] * W;
	}
	for (long long base = warp * P; base < n; base += warps * P) {
		const unsigned char* src = 0;
		unsigned char* dst = 0;
		if (lane < P && base + lane < n) {
			src = sk_row(a, sk_flat(a, base + lane), 0, &dst);
			if (src == 0) {
				dst = 0;
			}
		}
		unsigned long long v[U];
		unsigned long long* d[U];
#pragma unroll
		for (int j = 0; j < U; j++) {
			int from = row[j] < P ? row[j] : 0;
			const unsigned long long* sp = (const unsigned long long*)__shfl_sync(0xffffffffu, (unsigned long long)src, from);
			d[j] = (unsigned long long*)__shfl_sync(0xffffffffu, (unsigned long long)dst, from);
			if (row[j] >= P || sp == 0) {
				d[j] = 0;
			} else {
				v[j] = sp[word[j]];
			}
		}
#pragma unroll
		for (int j = 0; j < U; j++) {
			if (d[j] != 0) {
				d[j][word[j]] = v[j];
			}
		}
	}
}

// The generic gather: any row size and alignment, a byte per lane per
// step, a row per warp.
template <class A>
__device__ __forceinline__ void sk_gather_any(const A& a) {
	const long long n = a.t * a.k;
	const int lane = threadIdx.x & 31;
	const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) {
		long long r = sk_flat(a, i);
		unsigned char* dst = 0;
		const unsigned char* src = sk_row(a, r, lane, &dst);
		if (src == 0) {
			continue;
		}
		for (long long w = lane; w < a.row_bytes; w += 32) {
			dst[w] = src[w];
		}
	}
}

// Validation pass of strict lookups: records the first bad id; the
// _checked kernels then do nothing when the status word is set.
template <class A>
__device__ __forceinline__ void sk_validate_all(const A& a) {
	const long long n = a.t * a.k;
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (long long)gridDim.x * blockDim.x) {
		long long ti = r / a.k, ki = r - ti * a.k;
		long long id = sk_id(a, ti, ki);
		if (id == -1) {
			continue;
		}
		long long row = id - a.cols[ki].offset;
		if (row < 0 || row >= a.cols[ki].rows) {
			sk_bad(a, r);
		}
	}
}

// Each kernel comes plain, _checked (does nothing once the status word is
// set: strict lookups), and both again ordered (suffix _o).
#define SK_ONE(name, C, ORD, body)                                                          \
	extern "C" __global__ void __launch_bounds__(256) name(const sk_args<C, ORD> a) {       \
		body;                                                                               \
	}                                                                                       \
	extern "C" __global__ void __launch_bounds__(256) name##_checked(const sk_args<C, ORD> a) { \
		if (*(volatile unsigned long long*)a.status != 0) return;                          \
		body;                                                                               \
	}

#define SK_BOTH(name, body)                                                                 \
	SK_ONE(name##_c8, 8, false, body) SK_ONE(name##_c64, 64, false, body)                   \
	SK_ONE(name##_c8_o, 8, true, body) SK_ONE(name##_c64_o, 64, true, body)

// Word size 16: R a multiple of 16.
SK_BOTH(sk_w16_g4_m1_r4, (sk_gather<uint4, 4, 1, 4>(a)))
SK_BOTH(sk_w16_g8_m1_r4, (sk_gather<uint4, 8, 1, 4>(a)))
SK_BOTH(sk_w16_g16_m1_r4, (sk_gather<uint4, 16, 1, 4>(a)))
SK_BOTH(sk_w16_g32_m1_r4, (sk_gather<uint4, 32, 1, 4>(a)))
SK_BOTH(sk_w16_g32_m2_r2, (sk_gather<uint4, 32, 2, 2>(a)))
SK_BOTH(sk_w16_g32_m4_r2, (sk_gather<uint4, 32, 4, 2>(a)))
SK_BOTH(sk_w16_g32_m8_r1, (sk_gather<uint4, 32, 8, 1>(a)))
// Rows of 16c+8 bytes (264 = 16*16+8), 8-byte aligned.
SK_BOTH(sk_w8x16_g16_m1_r4, (sk_gather_8x16<16, 1, 4>(a)))
SK_BOTH(sk_w8x16_g16_m1_r8, (sk_gather_8x16<16, 1, 8>(a)))
SK_BOTH(sk_w8x16_g16_m1_r1, (sk_gather_8x16<16, 1, 1>(a)))
SK_BOTH(sk_w8x16_g32_m1_r4, (sk_gather_8x16<32, 1, 4>(a)))
SK_BOTH(sk_w8x16_g32_m2_r2, (sk_gather_8x16<32, 2, 2>(a)))
SK_BOTH(sk_w8x16_g32_m4_r2, (sk_gather_8x16<32, 4, 2>(a)))
SK_BOTH(sk_w8x16_g32_m8_r1, (sk_gather_8x16<32, 8, 1>(a)))
// Word size 8.
SK_BOTH(sk_w8_g32_m1_r4, (sk_gather<uint2, 32, 1, 4>(a)))
SK_BOTH(sk_w8_g32_m2_r4, (sk_gather<uint2, 32, 2, 4>(a)))
SK_BOTH(sk_w8_g32_m4_r2, (sk_gather<uint2, 32, 4, 2>(a)))
SK_BOTH(sk_w8_g32_m8_r1, (sk_gather<uint2, 32, 8, 1>(a)))
// Word size 4.
SK_BOTH(sk_w4_g32_m1_r4, (sk_gather<unsigned int, 32, 1, 4>(a)))
SK_BOTH(sk_w4_g32_m2_r4, (sk_gather<unsigned int, 32, 2, 4>(a)))
SK_BOTH(sk_w4_g32_m4_r2, (sk_gather<unsigned int, 32, 4, 2>(a)))
SK_BOTH(sk_w4_g32_m8_r1, (sk_gather<unsigned int, 32, 8, 1>(a)))
// Rows of W 8-byte words as one stream of words, U words a lane.
SK_BOTH(sk_wf8_g32_m4_r1, (sk_gather_flat<4>(a)))
SK_BOTH(sk_wf8_g32_m8_r1, (sk_gather_flat<8>(a)))
SK_BOTH(sk_wf8_g32_m16_r1, (sk_gather_flat<16>(a)))
// Anything else.
SK_BOTH(sk_any, (sk_gather_any(a)))

extern "C" __global__ void sk_validate_c8(const sk_args<8> a) { sk_validate_all(a); }
extern "C" __global__ void sk_validate_c64(const sk_args<64> a) { sk_validate_all(a); }
extern "C" __global__ void __launch_bounds__(256) sk_order_count_c8(const sk_args<8> a) { sk_order_count_all(a); }
extern "C" __global__ void __launch_bounds__(256) sk_order_count_c64(const sk_args<64> a) { sk_order_count_all(a); }
extern "C" __global__ void __launch_bounds__(1024) sk_order_scan_c8(const sk_args<8> a) { sk_order_scan_all(a); }
extern "C" __global__ void __launch_bounds__(1024) sk_order_scan_c64(const sk_args<64> a) { sk_order_scan_all(a); }
extern "C" __global__ void __launch_bounds__(256) sk_order_place_c8(const sk_args<8> a) { sk_order_place_all(a); }
extern "C" __global__ void __launch_bounds__(256) sk_order_place_c64(const sk_args<64> a) { sk_order_place_all(a); }
