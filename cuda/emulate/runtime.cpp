// The CPU emulator's launch machinery (see cuda_emulate.h for what it runs and its limits) and
// its C interface, hinoki_emu_launch, called by src/walk/gpu/emulator.rs.
//
// A launch runs on the calling thread. Each CUDA thread of a block is a fiber with its own stack;
// a scheduler runs the ready fibers in turn from a queue. A fiber runs until it waits at a block
// barrier or a warp operation, yields (atomics, fences) or returns from the kernel, and then
// switches back to the scheduler. The last live thread to reach a barrier completes it: it
// computes every participant's result, queues the others and goes on. When no fiber is ready
// while threads still wait, the barriers they wait at can never complete: the launch fails with
// "deadlock". Each fiber runs the kernel once per block (block after block), so a launch creates
// its fibers once, whatever its number of blocks.

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// After the standard headers (it defines CUDA's keywords as macros).
#include "cuda_emulate.h"

namespace hinoki_emu {
namespace {

constexpr unsigned max_block = 1024;
constexpr unsigned max_grid = 0x7fffffffu;
constexpr std::size_t stack_bytes = 256 * 1024;
constexpr unsigned full_mask = 0xffffffffu;

// printf into a std::string.
__attribute__((format(printf, 1, 0))) std::string vformat(const char *fmt, va_list args)
{
    va_list again;
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, again);
    va_end(again);
    std::string s(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
    std::vsnprintf(s.data(), s.size() + 1, fmt, args);
    return s;
}

__attribute__((format(printf, 1, 2))) std::string format(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    return s;
}

// ---- Execution contexts --------------------------------------------------------------------

#if defined(__x86_64__)

} // namespace
} // namespace hinoki_emu

// Pushes the callee-saved registers of the System V ABI on the current stack, stores the stack
// pointer in *save, loads `load` as the stack pointer and pops the registers saved there: the
// context saved by an earlier call, or a new one (Context::prepare) whose return address is its
// entry function. Nothing else needs saving: the caller keeps its other registers across a call.
extern "C" __attribute__((visibility("hidden"))) void hinoki_emu_switch(void **save, void *load);
asm(R"(
    .pushsection .text
    .globl hinoki_emu_switch
    .hidden hinoki_emu_switch
    .type hinoki_emu_switch, @function
hinoki_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size hinoki_emu_switch, .-hinoki_emu_switch
    .popsection
)");

namespace hinoki_emu {
namespace {

// A suspended execution context: a stack pointer with hinoki_emu_switch's frame on top.
class Context {
public:
    // Makes a context that calls `entry` (which must never return) on stack [stack, stack + size).
    void prepare(char *stack, std::size_t size, void (*entry)())
    {
        const auto top = reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t{15};
        // Six zero registers, then the return address `entry`, then a null return address for
        // entry itself: entry starts with the stack pointer 8 bytes off 16, as after a call.
        auto **frame = reinterpret_cast<void **>(top) - 8;
        std::fill(frame, frame + 8, nullptr);
        frame[6] = reinterpret_cast<void *>(entry);
        sp_ = frame;
    }

    // Saves the running context here and resumes `next`.
    void switch_to(Context &next) { hinoki_emu_switch(&sp_, next.sp_); }

private:
    void *sp_ = nullptr;
};

#else

// A suspended execution context (ucontext: portable, slower than a stack switch of our own
// because it saves and restores the signal mask).
class Context {
public:
    // Makes a context that calls `entry` (which must never return) on stack [stack, stack + size).
    void prepare(char *stack, std::size_t size, void (*entry)())
    {
        getcontext(&uc_);
        uc_.uc_stack.ss_sp = stack;
        uc_.uc_stack.ss_size = size;
        uc_.uc_link = nullptr;
        makecontext(&uc_, entry, 0);
    }

    // Saves the running context here and resumes `next`.
    void switch_to(Context &next) { swapcontext(&uc_, &next.uc_); }

private:
    ucontext_t uc_;
};

#endif

// The fibers' stacks, each above an inaccessible guard page (an overflow faults instead of
// corrupting a neighbour). Mapped once and kept: pages are only committed as stacks touch them.
class Stacks {
public:
    Stacks() = default;
    Stacks(const Stacks &) = delete;
    Stacks &operator=(const Stacks &) = delete;
    ~Stacks() { release(); }

    // Makes room for n stacks; false when the memory cannot be mapped.
    bool reserve(unsigned n)
    {
        if (n <= count_)
            return true;
        release();
        void *p = mmap(nullptr, n * slot(), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (p == MAP_FAILED)
            return false;
        base_ = static_cast<char *>(p);
        count_ = n;
        for (unsigned i = 0; i < n; ++i)
            if (mprotect(base_ + i * slot(), page(), PROT_NONE) != 0) {
                release();
                return false;
            }
        return true;
    }

    // The lowest address of stack i (stack_bytes long).
    char *stack(unsigned i) const { return base_ + i * slot() + page(); }

private:
    static std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
    static std::size_t slot() { return page() + stack_bytes; }

    void release()
    {
        if (base_ != nullptr)
            munmap(base_, count_ * slot());
        base_ = nullptr;
        count_ = 0;
    }

    char *base_ = nullptr;
    unsigned count_ = 0;
};

// ---- A launch ------------------------------------------------------------------------------

// Where a thread of the running block stands.
enum class State : unsigned char { Ready, AtBlockBarrier, AtWarpOp, Exited };

// A warp of the running block and the warp operation its lanes are gathering at.
struct Warp {
    unsigned live = full_mask; // lanes that have not returned
    unsigned arrived = 0;      // lanes waiting at the operation
    WarpOp op = WarpOp::Sync;
    int width = 32;
    unsigned mask[32];
    unsigned long long in[32];
    int arg[32];
    unsigned long long out[32];
};

// The queue of ready fibers: each is in it at most once, so `threads` slots hold it.
class ReadyQueue {
public:
    explicit ReadyQueue(unsigned threads) : slots_(threads) {}
    bool empty() const { return size_ == 0; }
    void push(unsigned t)
    {
        const std::size_t tail = head_ + size_++;
        slots_[tail < slots_.size() ? tail : tail - slots_.size()] = t;
    }
    unsigned pop()
    {
        const unsigned t = slots_[head_];
        if (++head_ == slots_.size())
            head_ = 0;
        --size_;
        return t;
    }

private:
    std::vector<unsigned> slots_;
    std::size_t head_ = 0, size_ = 0;
};

struct Launch {
    Launch(const Kernel &k, const void *const *a, unsigned threads)
        : kernel(k), args(a), fibers(threads), state(threads), warps(threads / 32), ready(threads)
    {
    }

    const Kernel &kernel;
    const void *const *args;
    std::vector<Context> fibers;
    std::vector<State> state;
    std::vector<Warp> warps;
    ReadyQueue ready;
    Context scheduler;
    unsigned current = 0; // the running fiber (= threadIdx.x)
    unsigned live = 0;    // threads of the block that have not returned
    // The block barrier being gathered: threads there, its kind, its true predicates, and the
    // result of the last one completed.
    unsigned arrived = 0;
    BlockSync kind = BlockSync::Plain;
    int tally = 0;
    int result = 0;
    std::string error;
};

std::mutex launch_mutex;
Stacks stacks;            // guarded by launch_mutex
Launch *active = nullptr; // the running launch, guarded by launch_mutex

const char *name_of(BlockSync kind)
{
    switch (kind) {
    case BlockSync::Plain: return "__syncthreads";
    case BlockSync::Count: return "__syncthreads_count";
    case BlockSync::And: return "__syncthreads_and";
    case BlockSync::Or: return "__syncthreads_or";
    }
    return "?";
}

const char *name_of(WarpOp op)
{
    switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::Shfl: return "__shfl_sync";
    case WarpOp::ShflUp: return "__shfl_up_sync";
    case WarpOp::ShflDown: return "__shfl_down_sync";
    case WarpOp::ShflXor: return "__shfl_xor_sync";
    case WarpOp::Ballot: return "__ballot_sync";
    case WarpOp::Any: return "__any_sync";
    case WarpOp::All: return "__all_sync";
    case WarpOp::MatchAny: return "__match_any_sync";
    case WarpOp::ReduceAdd: return "__reduce_add_sync";
    case WarpOp::ReduceMinU:
    case WarpOp::ReduceMinI: return "__reduce_min_sync";
    case WarpOp::ReduceMaxU:
    case WarpOp::ReduceMaxI: return "__reduce_max_sync";
    }
    return "?";
}

// The type a parameter letter of Kernel::params stands for.
const char *type_of(char kind)
{
    switch (kind) {
    case 'p': return "a pointer";
    case 'i': return "int";
    case 'u': return "unsigned";
    case 'U': return "unsigned long long";
    case 'f': return "float";
    case 'd': return "double";
    }
    return "of an unknown kind";
}

// Suspends the running fiber until the scheduler resumes it.
void suspend(Launch &l) { l.fibers[l.current].switch_to(l.scheduler); }

// Fails the launch from the running fiber, which is never resumed (its stack holds no object
// that needs destroying: only this function's arguments, formatted before the switch).
[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
    Launch &l = *active;
    va_list args;
    va_start(args, fmt);
    l.error = format("block %u, thread %u: ", block_index.x, l.current) + vformat(fmt, args);
    va_end(args);
    suspend(l);
    __builtin_unreachable();
}

// Makes ready the threads of [from, from + count) in state `waiting`, and queues them but the
// running one (which goes on).
void wake(Launch &l, unsigned from, unsigned count, State waiting)
{
    for (unsigned t = from; t < from + count; ++t)
        if (l.state[t] == waiting) {
            l.state[t] = State::Ready;
            if (t != l.current)
                l.ready.push(t);
        }
}

void complete_block_barrier(Launch &l)
{
    switch (l.kind) {
    case BlockSync::Plain: l.result = 0; break;
    case BlockSync::Count: l.result = l.tally; break;
    case BlockSync::And: l.result = l.tally == static_cast<int>(l.arrived); break;
    case BlockSync::Or: l.result = l.tally != 0; break;
    }
    l.arrived = 0;
    l.tally = 0;
    wake(l, 0, static_cast<unsigned>(l.state.size()), State::AtBlockBarrier);
}

// The lane a shuffle of `lane` reads, or `lane` itself where CUDA returns the caller's value.
unsigned shuffle_source(const Warp &w, unsigned lane)
{
    const long long width = w.width, first = lane & ~(w.width - 1), last = first + width - 1;
    const long long delta = static_cast<unsigned>(w.arg[lane]);
    long long src = lane;
    switch (w.op) {
    case WarpOp::Shfl: src = first + (w.arg[lane] & (w.width - 1)); break;
    case WarpOp::ShflUp: src = lane - delta; break;
    case WarpOp::ShflDown: src = lane + delta; break;
    // Lanes of earlier segments may be read, not of later ones.
    case WarpOp::ShflXor: src = lane ^ static_cast<unsigned>(w.arg[lane]); break;
    default: break;
    }
    const bool below = src < first && w.op != WarpOp::ShflXor;
    const bool above = src > last;
    return below || above || ((w.live >> src) & 1u) == 0 ? lane : static_cast<unsigned>(src);
}

// The result of a gathered vote or reduction over the live lanes `group`.
unsigned long long reduce(const Warp &w, unsigned group)
{
    unsigned ballot = 0, sum = 0, min_u = full_mask, max_u = 0;
    int min_i = std::numeric_limits<int>::max(), max_i = std::numeric_limits<int>::min();
    for (unsigned m = 0; m < 32; ++m)
        if ((group >> m) & 1u) {
            const auto v = static_cast<unsigned>(w.in[m]);
            ballot |= static_cast<unsigned>(v != 0) << m;
            sum += v;
            min_u = std::min(min_u, v);
            max_u = std::max(max_u, v);
            min_i = std::min(min_i, static_cast<int>(v));
            max_i = std::max(max_i, static_cast<int>(v));
        }
    switch (w.op) {
    case WarpOp::Ballot: return ballot;
    case WarpOp::Any: return ballot != 0;
    case WarpOp::All: return ballot == group;
    case WarpOp::ReduceAdd: return sum;
    case WarpOp::ReduceMinU: return min_u;
    case WarpOp::ReduceMaxU: return max_u;
    case WarpOp::ReduceMinI: return static_cast<unsigned>(min_i);
    case WarpOp::ReduceMaxI: return static_cast<unsigned>(max_i);
    default: return 0;
    }
}

// Computes every arrived lane's result of the gathered warp operation and wakes the lanes.
void complete_warp(Launch &l, unsigned warp)
{
    Warp &w = l.warps[warp];
    // Lanes that pass the same mask (usually all) share the result of a vote or reduction.
    bool have_reduced = false;
    unsigned reduced_mask = 0;
    unsigned long long reduced = 0;
    for (unsigned lane = 0; lane < 32; ++lane) {
        if (((w.arrived >> lane) & 1u) == 0)
            continue;
        switch (w.op) {
        case WarpOp::Sync: break;
        case WarpOp::Shfl:
        case WarpOp::ShflUp:
        case WarpOp::ShflDown:
        case WarpOp::ShflXor: w.out[lane] = w.in[shuffle_source(w, lane)]; break;
        case WarpOp::MatchAny: {
            const unsigned group = w.mask[lane] & w.live;
            unsigned matches = 0;
            for (unsigned m = 0; m < 32; ++m)
                if (((group >> m) & 1u) != 0 && w.in[m] == w.in[lane])
                    matches |= 1u << m;
            w.out[lane] = matches;
            break;
        }
        default:
            if (!have_reduced || w.mask[lane] != reduced_mask) {
                have_reduced = true;
                reduced_mask = w.mask[lane];
                reduced = reduce(w, reduced_mask & w.live);
            }
            w.out[lane] = reduced;
        }
    }
    w.arrived = 0;
    wake(l, warp * 32, 32, State::AtWarpOp);
}

// The running thread returned from the kernel: it leaves its block's barriers, which may thereby
// complete, and waits for the next block.
void exit_thread(Launch &l)
{
    const unsigned t = l.current;
    Warp &w = l.warps[t / 32];
    l.state[t] = State::Exited;
    --l.live;
    w.live &= ~(1u << (t % 32));
    if (w.arrived != 0 && w.arrived == w.live)
        complete_warp(l, t / 32);
    if (l.arrived != 0 && l.arrived == l.live)
        complete_block_barrier(l);
    suspend(l);
}

// What every fiber runs: the kernel, once per block.
[[noreturn]] void fiber_main()
{
    for (;;) {
        active->kernel.invoke(active->args);
        exit_thread(*active);
    }
}

// Runs block b of the launch; false when it failed (l.error says why).
bool run_block(Launch &l, unsigned b)
{
    const auto threads = static_cast<unsigned>(l.state.size());
    block_index = {b, 0, 0};
    l.live = threads;
    l.arrived = 0;
    l.tally = 0;
    for (Warp &w : l.warps) {
        w.live = full_mask;
        w.arrived = 0;
    }
    for (unsigned t = 0; t < threads; ++t) {
        l.state[t] = State::Ready;
        l.ready.push(t);
    }
    while (!l.ready.empty()) {
        l.current = l.ready.pop();
        thread_index = {l.current, 0, 0};
        l.scheduler.switch_to(l.fibers[l.current]);
        if (!l.error.empty())
            return false;
    }
    if (l.live == 0)
        return true;
    const auto at_block =
        static_cast<unsigned>(std::count(l.state.begin(), l.state.end(), State::AtBlockBarrier));
    l.error = format("block %u: deadlock: %u threads wait at %s, %u at warp operations (lanes of "
                     "a warp diverged between the two)",
                     b, at_block, name_of(l.kind), l.live - at_block);
    return false;
}

// Runs a launch; the empty string on success, else why it failed.
std::string run(const char *name, unsigned grid, unsigned block, const void *const *args,
                const char *kinds, unsigned long nargs)
{
    const auto table = kernels();
    const auto k = std::find_if(table.begin(), table.end(), [name](const Kernel &k) {
        return std::strcmp(k.name, name) == 0;
    });
    if (k == table.end())
        return format("no kernel '%s' is registered in cuda/emulate/kernels.cpp", name);
    const std::size_t arity = std::strlen(k->params);
    if (nargs != arity)
        return format("kernel %s takes %zu arguments, %lu given", name, arity, nargs);
    for (std::size_t i = 0; i < arity; ++i)
        if (kinds[i] != k->params[i])
            return format("kernel %s: argument %zu is %s, %s given", name, i,
                          type_of(k->params[i]), type_of(kinds[i]));
    if (block < 32 || block > max_block || block % 32 != 0)
        return format("kernel %s: blocks of %u threads; the emulator runs 32 to %u in multiples "
                      "of 32", name, block, max_block);
    if (grid < 1 || grid > max_grid)
        return format("kernel %s: a grid of %u blocks; 1 to %u are possible", name, grid, max_grid);

    const std::lock_guard lock(launch_mutex);
    if (!stacks.reserve(block))
        return format("kernel %s: cannot map %u stacks of %zu KiB", name, block,
                      stack_bytes / 1024);
    Launch l(*k, args, block);
    for (unsigned t = 0; t < block; ++t)
        l.fibers[t].prepare(stacks.stack(t), stack_bytes, fiber_main);
    block_dim = {block, 1, 1};
    grid_dim = {grid, 1, 1};
    active = &l;
    for (unsigned b = 0; b < grid && run_block(l, b); ++b) {
    }
    active = nullptr;
    return l.error.empty() ? std::string() : format("kernel %s, %s", name, l.error.c_str());
}

} // namespace

// ---- The kernels' side of cuda_emulate.h ---------------------------------------------------

int block_sync(BlockSync kind, int predicate)
{
    Launch &l = *active;
    if (l.arrived == 0)
        l.kind = kind;
    else if (l.kind != kind)
        fail("threads reached different block barriers (%s and %s)", name_of(l.kind),
             name_of(kind));
    l.tally += predicate != 0;
    ++l.arrived;
    l.state[l.current] = State::AtBlockBarrier;
    if (l.arrived == l.live)
        complete_block_barrier(l);
    else
        suspend(l);
    return l.result;
}

unsigned long long warp_op(WarpOp op, unsigned mask, unsigned long long value, int arg, int width)
{
    Launch &l = *active;
    const unsigned warp = l.current / 32, lane = l.current % 32;
    Warp &w = l.warps[warp];
    if (((mask >> lane) & 1u) == 0)
        fail("%s with mask 0x%08x, which leaves out the calling lane %u", name_of(op), mask, lane);
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fail("%s with width %d (a power of 2 up to 32 is needed)", name_of(op), width);
    if (w.arrived == 0) {
        w.op = op;
        w.width = width;
    } else if (w.op != op || w.width != width) {
        fail("lanes of warp %u reached different warp operations (%s, width %d, and %s, width %d)",
             warp, name_of(w.op), w.width, name_of(op), width);
    }
    w.mask[lane] = mask;
    w.in[lane] = value;
    w.arg[lane] = arg;
    w.arrived |= 1u << lane;
    l.state[l.current] = State::AtWarpOp;
    if (w.arrived == w.live)
        complete_warp(l, warp);
    else
        suspend(l);
    return w.out[lane];
}

unsigned live_lanes() { return active->warps[active->current / 32].live; }

void yield()
{
    Launch &l = *active;
    l.ready.push(l.current);
    suspend(l);
}

} // namespace hinoki_emu

// Launches kernel `name` on `grid` blocks of `block` threads. args[k] points to the value of
// parameter k (8 bytes for a pointer), kinds[k] is its letter (see hinoki_emu::Kernel::params);
// both hold nargs entries. Returns 0 when the launch ran to its end; otherwise non-zero with a
// one-line message in err (errlen bytes, NUL-terminated, cut where too long).
extern "C" int hinoki_emu_launch(const char *name, unsigned grid, unsigned block,
                                 const void *const *args, const char *kinds, unsigned long nargs,
                                 char *err, unsigned long errlen) noexcept
{
    std::string error;
    try {
        error = hinoki_emu::run(name, grid, block, args, kinds, nargs);
    } catch (const std::exception &e) {
        error = e.what();
    }
    if (error.empty())
        return 0;
    if (errlen > 0)
        std::snprintf(err, errlen, "%s", error.c_str());
    return 1;
}
