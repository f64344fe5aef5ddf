// CUDA C++ on the CPU: the shim that lets hinoki's kernel sources (cuda/*.cu) compile unchanged
// as C++20 with g++ or clang++. It is force-included before them (`-include cuda_emulate.h`, as
// build.rs compiles cuda/emulate/kernels.cpp and walk_layout.cpp) and stands for what NVRTC
// provides without any #include: the execution-space keywords (__launch_bounds__ is ignored), the
// built-in variables, vector types, warp and block intrinsics, atomics, bit and math intrinsics.
// runtime.cpp runs the launches; kernels.cpp lists the kernels, walk_layout.cpp those of the walk
// program (cuda/walk.cu, walk_list.cu, direct.cu, unsort.cu), compiled once per (V, G) layout
// and registered as kernel@V,G; src/gpu/emulator.rs drives them from Rust.
//
// How a launch runs. Every CUDA thread of a block is a fiber (its own stack) on the CPU thread
// that launched; the fibers of a block take turns, each running until it reaches a block barrier
// (__syncthreads*), a warp operation, an atomic, a fence, __nanosleep or its end. Blocks run one
// after another in order of blockIdx.x, and launches one at a time (one mutex): so a __shared__
// variable is a plain static, one copy for the block that runs. It keeps what the previous block
// or launch left there (on a GPU its contents are undefined at block start): initialize it, as on
// a GPU. A thread that returns leaves its block: later barriers and warp operations count only
// the threads still running (live), as on Volta and later GPUs. A warp operation synchronizes the
// live lanes of its mask only, as on those GPUs (independent thread scheduling): the other lanes
// run on meanwhile, and may meet at other warp operations with masks of their own. The
// interleaving is fixed, so a launch's results are the same from run to run.
//
// Limits. Breaking one of the first three makes the launch fail with a message (never a hang):
//   - blocks of 32 to 1024 threads in multiples of 32, grids of 1 to 2^31 - 1 blocks, both
//     one-dimensional (threadIdx.y/z and blockIdx.y/z are 0);
//   - a warp operation (__shfl*_sync, __ballot_sync, __any_sync, __all_sync, __match_any_sync,
//     __reduce_*_sync, __syncwarp) waits until every live lane of its mask, which must name the
//     calling lane, waits at a warp operation with that same mask (CUDA's rule); then it
//     completes for those lanes. Lanes that meet so at different kinds of operation (or widths)
//     fail the launch, and so do two lanes that wait for each other (each in the other's mask)
//     at operations with different masks; waits that can never end otherwise (a lane of the mask
//     at __syncthreads, or waiting for yet another mask in a cycle) fail as a deadlock. Lanes
//     that reach the same kind of operation at different places in the source meet there (as
//     __syncwarp does on a GPU). The results are CUDA's for the live lanes of the mask: the bits
//     of a vote or match are theirs; a shuffle whose source lane is outside the mask or has
//     exited returns the caller's own value (undefined on a GPU); __activemask() is the mask of
//     live lanes (a GPU may report fewer: those converged with the caller);
//   - all threads of a block that do not return must reach the same kind of block barrier;
//   - a thread that waits for another thread of its block must spin on an atomic, a fence or
//     __nanosleep (they let the others run), never on plain or volatile loads alone, which would
//     never end; a block that waits for a later block never ends either (blocks run in order);
//   - no dynamic (extern __shared__) shared memory, cooperative groups, inline PTX, textures,
//     host-set __constant__ memory, clock(), multiple dimensions; no limit on static shared
//     memory (a GPU has 48 KiB) nor on registers; #pragma unroll is ignored (build.rs silences
//     g++'s warning for it);
//   - each thread has a 256 KiB stack; a kernel must not throw.
// Arithmetic is the CPU's IEEE single and double precision, with no fused multiply-add that the
// source does not write (build.rs passes -ffp-contract=off): bit for bit what Rust computes for
// the same operations. Intrinsics that are approximate on a GPU are the plain operations here
// (rsqrtf(x) is 1.0f / sqrtf(x), __expf is expf, __fdividef(a, b) is a / b, ...), so they may
// differ from a GPU's in the last bits; NVRTC's --use_fast_math (the walk program's) has no
// effect here (no flush to zero, IEEE division and square roots).
//
// The shim defines HINOKI_EMULATOR, so that a kernel source can tell it from NVRTC (#ifdef), e.g.
// around inline PTX.
#pragma once

// Every standard header first: the CUDA keywords defined at the end (__noinline__ among them)
// would break standard headers included after them.
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <math.h>
#include <span>
#include <type_traits>
#include <utility>

#define HINOKI_EMULATOR 1

// ---- Built-in types --------------------------------------------------------------------------

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// Vector types with CUDA's sizes and alignments.
struct alignas(8) int2 { int x, y; };
struct int3 { int x, y, z; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct float3 { float x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct double3 { double x, y, z; };
struct alignas(16) double4 { double x, y, z, w; };
struct alignas(16) ulonglong2 { unsigned long long x, y; };

inline int2 make_int2(int x, int y) { return {x, y}; }
inline int3 make_int3(int x, int y, int z) { return {x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }
inline double3 make_double3(double x, double y, double z) { return {x, y, z}; }
inline double4 make_double4(double x, double y, double z, double w) { return {x, y, z, w}; }
inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { return {x, y}; }

// ---- The runtime's side (runtime.cpp) ----------------------------------------------------------

namespace hinoki_emu {

// The geometry of the launch and the running thread, set by the runtime; kernels read them
// through threadIdx, blockIdx, blockDim and gridDim.
inline uint3 thread_index{};
inline uint3 block_index{};
inline dim3 block_dim;
inline dim3 grid_dim;

// The warp operations: each makes the live lanes of its mask meet.
enum class WarpOp : unsigned char {
    Sync,
    Shfl,
    ShflUp,
    ShflDown,
    ShflXor,
    Ballot,
    Any,
    All,
    MatchAny,
    ReduceAdd,
    ReduceMinU,
    ReduceMaxU,
    ReduceMinI,
    ReduceMaxI,
};

// The block barriers and what they return: nothing, the count of true predicates, whether all
// are true, whether any is.
enum class BlockSync : unsigned char { Plain, Count, And, Or };

// Waits until every live thread of the block has arrived at a barrier of this kind; returns the
// reduction of the predicates.
int block_sync(BlockSync kind, int predicate);

// Waits until every live lane of `mask` has arrived at `op` with this same mask and returns this
// lane's result. `value` holds the lane's operand (4-byte types zero-extended); `arg` is the
// source lane, delta or lane mask of a shuffle; `width` is a shuffle's segment width (32 for other
// operations).
unsigned long long warp_op(WarpOp op, unsigned mask, unsigned long long value, int arg, int width);

// The live lanes of the running thread's warp.
unsigned live_lanes();

// Lets the other threads of the block run before this one goes on.
void yield();

// A kernel the emulator can launch (kernels.cpp and walk_layout.cpp list them with
// HINOKI_EMULATE and HINOKI_EMULATE_AS).
struct Kernel {
    // The kernel's name, as launches give it: its name in the source, followed by @V,G for a
    // kernel of one walk layout (walk_layout.cpp).
    const char *name;
    // One letter per parameter: p pointer, i int, u unsigned, U unsigned long long, f float,
    // d double, b a struct (an argument block).
    const char *params;
    // The size in bytes of each parameter, and its alignment.
    const unsigned long *sizes;
    const unsigned long *aligns;
    // Runs the kernel for the running thread; args[k] points to the value of parameter k.
    void (*invoke)(const void *const *args);
};

// Every kernel the emulator knows, in tables: kernels.cpp's own, then one per walk layout
// (defined in kernels.cpp).
std::span<const std::span<const Kernel>> kernel_tables();

// The letter of a kernel parameter's type in Kernel::params.
template <class T>
consteval char param_kind()
{
    if constexpr (std::is_pointer_v<T>)
        return 'p';
    else if constexpr (std::is_same_v<T, int>)
        return 'i';
    else if constexpr (std::is_same_v<T, unsigned>)
        return 'u';
    else if constexpr (std::is_same_v<T, unsigned long long>)
        return 'U';
    else if constexpr (std::is_same_v<T, float>)
        return 'f';
    else if constexpr (std::is_same_v<T, double>)
        return 'd';
    else if constexpr (std::is_class_v<T> && std::is_trivially_copyable_v<T>)
        return 'b';
    else
        static_assert(!std::is_same_v<T, T>,
                      "a kernel parameter must be a pointer, int, unsigned, unsigned long long, "
                      "float, double or a struct (an argument block)");
}

// The Kernel entry of kernel F: its parameter letters and a function that calls it with
// arguments unpacked from an array of pointers to their values.
template <auto F>
struct Entry;

template <class... P, void (*F)(P...)>
struct Entry<F> {
    static constexpr char params[] = {param_kind<P>()..., '\0'};
    static constexpr unsigned long sizes[] = {sizeof(P)..., 0};
    static constexpr unsigned long aligns[] = {alignof(P)..., 0};

    static void invoke([[maybe_unused]] const void *const *args)
    {
        call(args, std::index_sequence_for<P...>{});
    }

private:
    template <std::size_t... I>
    static void call([[maybe_unused]] const void *const *args, std::index_sequence<I...>)
    {
        F(*static_cast<const P *>(args[I])...);
    }
};

// Types a shuffle or a match can carry: 4- and 8-byte arithmetic types.
template <class T>
concept Word = std::is_arithmetic_v<T> && (sizeof(T) == 4 || sizeof(T) == 8);

// The bits of a Word, zero-extended, and back.
template <Word T>
unsigned long long to_bits(T v)
{
    if constexpr (sizeof(T) == 4)
        return std::bit_cast<std::uint32_t>(v);
    else
        return std::bit_cast<std::uint64_t>(v);
}

template <Word T>
T from_bits(unsigned long long bits)
{
    if constexpr (sizeof(T) == 4)
        return std::bit_cast<T>(static_cast<std::uint32_t>(bits));
    else
        return std::bit_cast<T>(static_cast<std::uint64_t>(bits));
}

// A warp operation without a lane argument (votes, matches, reductions, __syncwarp).
inline unsigned long long vote(WarpOp op, unsigned mask, unsigned long long value)
{
    return warp_op(op, mask, value, 0, 32);
}

// A shuffle of var (CUDA's arguments: `arg` is the source lane, delta or lane mask).
template <Word T>
T shuffle(WarpOp op, unsigned mask, T var, int arg, int width)
{
    return from_bits<T>(warp_op(op, mask, to_bits(var), arg, width));
}

// The types an atomic takes.
template <class T, class... U>
concept OneOf = (std::is_same_v<T, U> || ...);

// Atomics are relaxed, as CUDA's.
inline constexpr auto relaxed = std::memory_order_relaxed;

// *address, accessed atomically.
template <class T>
std::atomic_ref<T> ref(T *address)
{
    return std::atomic_ref<T>(*address);
}

// What an atomic returns, once the other threads have run.
template <class T>
T after_atomic(T old)
{
    yield();
    return old;
}

// An atomic read-modify-write of *address to next(old), returning old.
template <class T, class F>
T atomic_update(T *address, F next)
{
    std::atomic_ref<T> a = ref(address);
    T old = a.load(relaxed);
    while (!a.compare_exchange_weak(old, next(old), relaxed)) {
    }
    return after_atomic(old);
}

// A float-to-integer conversion of a value already rounded to an integer, saturated to I's
// range as on a GPU (NaN gives 0).
template <class I>
I saturate(double rounded)
{
    if (rounded != rounded)
        return 0;
    if (rounded <= static_cast<double>(std::numeric_limits<I>::min()))
        return std::numeric_limits<I>::min();
    if (rounded >= static_cast<double>(std::numeric_limits<I>::max()))
        return std::numeric_limits<I>::max();
    return static_cast<I>(rounded);
}

} // namespace hinoki_emu

// One line of a kernel table: the Kernel entry of `kernel` (a function), launched as `name`.
#define HINOKI_EMULATE_AS(name, kernel)                                                          \
    ::hinoki_emu::Kernel { name, ::hinoki_emu::Entry<&kernel>::params,                           \
                           ::hinoki_emu::Entry<&kernel>::sizes,                                  \
                           ::hinoki_emu::Entry<&kernel>::aligns,                                 \
                           &::hinoki_emu::Entry<&kernel>::invoke }

// One line of kernels.cpp's table: the Kernel entry of the extern "C" kernel `kernel`, launched
// by its name.
#define HINOKI_EMULATE(kernel) HINOKI_EMULATE_AS(#kernel, kernel)

// ---- Built-in variables ----------------------------------------------------------------------

inline const uint3 &threadIdx = hinoki_emu::thread_index;
inline const uint3 &blockIdx = hinoki_emu::block_index;
inline const dim3 &blockDim = hinoki_emu::block_dim;
inline const dim3 &gridDim = hinoki_emu::grid_dim;
inline constexpr int warpSize = 32;

// ---- Barriers, fences --------------------------------------------------------------------------

inline void __syncthreads() { hinoki_emu::block_sync(hinoki_emu::BlockSync::Plain, 0); }
inline int __syncthreads_count(int predicate)
{
    return hinoki_emu::block_sync(hinoki_emu::BlockSync::Count, predicate);
}
inline int __syncthreads_and(int predicate)
{
    return hinoki_emu::block_sync(hinoki_emu::BlockSync::And, predicate);
}
inline int __syncthreads_or(int predicate)
{
    return hinoki_emu::block_sync(hinoki_emu::BlockSync::Or, predicate);
}

inline void __threadfence()
{
    std::atomic_thread_fence(std::memory_order_seq_cst);
    hinoki_emu::yield();
}
inline void __threadfence_block() { __threadfence(); }
inline void __nanosleep(unsigned) { hinoki_emu::yield(); }

// ---- Warp operations ---------------------------------------------------------------------------

inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    hinoki_emu::vote(hinoki_emu::WarpOp::Sync, mask, 0);
}
inline unsigned __activemask() { return hinoki_emu::live_lanes(); }

template <hinoki_emu::Word T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize)
{
    return hinoki_emu::shuffle(hinoki_emu::WarpOp::Shfl, mask, var, srcLane, width);
}
template <hinoki_emu::Word T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    return hinoki_emu::shuffle(hinoki_emu::WarpOp::ShflUp, mask, var, static_cast<int>(delta),
                               width);
}
template <hinoki_emu::Word T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    return hinoki_emu::shuffle(hinoki_emu::WarpOp::ShflDown, mask, var, static_cast<int>(delta),
                               width);
}
template <hinoki_emu::Word T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize)
{
    return hinoki_emu::shuffle(hinoki_emu::WarpOp::ShflXor, mask, var, laneMask, width);
}

inline unsigned __ballot_sync(unsigned mask, int predicate)
{
    return static_cast<unsigned>(
        hinoki_emu::vote(hinoki_emu::WarpOp::Ballot, mask, predicate != 0));
}
inline int __any_sync(unsigned mask, int predicate)
{
    return static_cast<int>(hinoki_emu::vote(hinoki_emu::WarpOp::Any, mask, predicate != 0));
}
inline int __all_sync(unsigned mask, int predicate)
{
    return static_cast<int>(hinoki_emu::vote(hinoki_emu::WarpOp::All, mask, predicate != 0));
}
template <hinoki_emu::Word T>
unsigned __match_any_sync(unsigned mask, T value)
{
    return static_cast<unsigned>(
        hinoki_emu::vote(hinoki_emu::WarpOp::MatchAny, mask, hinoki_emu::to_bits(value)));
}

inline unsigned __reduce_add_sync(unsigned mask, unsigned value)
{
    return static_cast<unsigned>(hinoki_emu::vote(hinoki_emu::WarpOp::ReduceAdd, mask, value));
}
inline int __reduce_add_sync(unsigned mask, int value)
{
    return static_cast<int>(__reduce_add_sync(mask, static_cast<unsigned>(value)));
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned value)
{
    return static_cast<unsigned>(hinoki_emu::vote(hinoki_emu::WarpOp::ReduceMinU, mask, value));
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned value)
{
    return static_cast<unsigned>(hinoki_emu::vote(hinoki_emu::WarpOp::ReduceMaxU, mask, value));
}
inline int __reduce_min_sync(unsigned mask, int value)
{
    return static_cast<int>(
        hinoki_emu::vote(hinoki_emu::WarpOp::ReduceMinI, mask, static_cast<unsigned>(value)));
}
inline int __reduce_max_sync(unsigned mask, int value)
{
    return static_cast<int>(
        hinoki_emu::vote(hinoki_emu::WarpOp::ReduceMaxI, mask, static_cast<unsigned>(value)));
}

// ---- Atomics (relaxed, on any memory) ----------------------------------------------------------

template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long, float, double>
T atomicAdd(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::after_atomic(hinoki_emu::ref(address).fetch_add(value, hinoki_emu::relaxed));
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned>
T atomicSub(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::after_atomic(hinoki_emu::ref(address).fetch_sub(value, hinoki_emu::relaxed));
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long, long long>
T atomicMin(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::atomic_update(address, [value](T old) { return value < old ? value : old; });
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long, long long>
T atomicMax(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::atomic_update(address, [value](T old) { return value > old ? value : old; });
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long>
T atomicCAS(T *address, std::type_identity_t<T> compare, std::type_identity_t<T> value)
{
    hinoki_emu::ref(address).compare_exchange_strong(compare, value, hinoki_emu::relaxed);
    return hinoki_emu::after_atomic(compare);
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long, float>
T atomicExch(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::after_atomic(hinoki_emu::ref(address).exchange(value, hinoki_emu::relaxed));
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long>
T atomicOr(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::after_atomic(hinoki_emu::ref(address).fetch_or(value, hinoki_emu::relaxed));
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long>
T atomicAnd(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::after_atomic(hinoki_emu::ref(address).fetch_and(value, hinoki_emu::relaxed));
}
template <class T>
    requires hinoki_emu::OneOf<T, int, unsigned, unsigned long long>
T atomicXor(T *address, std::type_identity_t<T> value)
{
    return hinoki_emu::after_atomic(hinoki_emu::ref(address).fetch_xor(value, hinoki_emu::relaxed));
}

// ---- Loads -----------------------------------------------------------------------------------

template <class T>
T __ldg(const T *address)
{
    return *address;
}

// ---- Bit intrinsics --------------------------------------------------------------------------

inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return std::countl_zero(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x)
{
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}

// ---- min and max, with CUDA's overloads for device code ----------------------------------------

#define HINOKI_EMU_MIN_MAX(R, A, B)                                                               \
    inline R min(A a, B b)                                                                     \
    {                                                                                          \
        return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b);  \
    }                                                                                          \
    inline R max(A a, B b)                                                                     \
    {                                                                                          \
        return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b);  \
    }
HINOKI_EMU_MIN_MAX(int, int, int)
HINOKI_EMU_MIN_MAX(unsigned, unsigned, unsigned)
HINOKI_EMU_MIN_MAX(unsigned, int, unsigned)
HINOKI_EMU_MIN_MAX(unsigned, unsigned, int)
HINOKI_EMU_MIN_MAX(long, long, long)
HINOKI_EMU_MIN_MAX(unsigned long, unsigned long, unsigned long)
HINOKI_EMU_MIN_MAX(unsigned long, long, unsigned long)
HINOKI_EMU_MIN_MAX(unsigned long, unsigned long, long)
HINOKI_EMU_MIN_MAX(long long, long long, long long)
HINOKI_EMU_MIN_MAX(unsigned long long, unsigned long long, unsigned long long)
HINOKI_EMU_MIN_MAX(unsigned long long, long long, unsigned long long)
HINOKI_EMU_MIN_MAX(unsigned long long, unsigned long long, long long)
#undef HINOKI_EMU_MIN_MAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }

// ---- Math intrinsics (<math.h> has the standard functions, float overloads included) -----------

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dsqrt_rn(double x) { return sqrt(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }

inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }

// Conversions: rn to nearest even, rz toward zero, rd down, ru up; saturated as on a GPU.
inline int __float2int_rn(float x) { return hinoki_emu::saturate<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return hinoki_emu::saturate<int>(truncf(x)); }
inline int __float2int_rd(float x) { return hinoki_emu::saturate<int>(floorf(x)); }
inline int __float2int_ru(float x) { return hinoki_emu::saturate<int>(ceilf(x)); }
inline unsigned __float2uint_rn(float x) { return hinoki_emu::saturate<unsigned>(nearbyintf(x)); }
inline unsigned __float2uint_rz(float x) { return hinoki_emu::saturate<unsigned>(truncf(x)); }
inline unsigned __float2uint_rd(float x) { return hinoki_emu::saturate<unsigned>(floorf(x)); }
inline unsigned __float2uint_ru(float x) { return hinoki_emu::saturate<unsigned>(ceilf(x)); }
inline int __double2int_rn(double x) { return hinoki_emu::saturate<int>(nearbyint(x)); }
inline int __double2int_rz(double x) { return hinoki_emu::saturate<int>(trunc(x)); }
inline int __double2int_rd(double x) { return hinoki_emu::saturate<int>(floor(x)); }
inline int __double2int_ru(double x) { return hinoki_emu::saturate<int>(ceil(x)); }
inline unsigned __double2uint_rn(double x) { return hinoki_emu::saturate<unsigned>(nearbyint(x)); }
inline unsigned __double2uint_rz(double x) { return hinoki_emu::saturate<unsigned>(trunc(x)); }
inline unsigned __double2uint_rd(double x) { return hinoki_emu::saturate<unsigned>(floor(x)); }
inline unsigned __double2uint_ru(double x) { return hinoki_emu::saturate<unsigned>(ceil(x)); }

// ---- Execution-space and memory-space keywords -------------------------------------------------
// __restrict__ is g++'s and clang++'s own keyword already.

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Blocks run one at a time: one static copy is the running block's shared memory.
#define __shared__ static
#define __constant__
