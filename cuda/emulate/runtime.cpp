// The CPU emulator's launch machinery (see cuda_emulate.h for what it runs and its limits) and
// its C interface, hinoki_emu_launch, called by src/gpu/emulator.rs.
//
// A launch runs on the calling thread. Each CUDA thread of a block is a fiber with its own stack;
// a scheduler runs the ready fibers in turn from a queue. A fiber runs until it waits at a block
// barrier or a warp operation, yields (atomics, fences) or returns from the kernel, and then
// switches back to the scheduler. The last live thread to reach a barrier completes it: it
// computes every participant's result, queues the others and goes on. The barrier of a warp
// operation is the live lanes of its mask, each waiting at an operation with that same mask
// (lanes of other masks wait for theirs meanwhile); a thread that returns completes those it was
// the last one missing from. When no fiber is ready while threads still wait, the barriers they
// wait at can never complete: the launch fails with "deadlock". Each fiber runs the kernel once
// per block (block after block), so a launch creates its fibers once, whatever its number of
// blocks.

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
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

// A warp of the running block and the warp operations its lanes wait at. A lane waits until
// every live lane of its operation's mask waits at an operation with that same mask; these lanes
// then form a group, the operation completes for them alone, and they go on.
struct Warp {
    unsigned live = full_mask; // lanes that have not returned
    unsigned arrived = 0;      // lanes waiting at a warp operation
    // Per waiting lane: its operation, segment width, mask, operand, lane argument; then its
    // result, written when its group completes.
    WarpOp op[32];
    int width[32];
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

// Makes ready the thread t in state `waiting`, and queues it unless it is the running one (which
// goes on).
void wake(Launch &l, unsigned t, State waiting)
{
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
    for (unsigned t = 0; t < l.state.size(); ++t)
        wake(l, t, State::AtBlockBarrier);
}

// The lowest lane of a non-empty lane mask.
unsigned first_lane(unsigned lanes) { return static_cast<unsigned>(std::countr_zero(lanes)); }

// The lane a shuffle of `lane` in `group` reads, or `lane` itself where CUDA returns the caller's
// value (a source outside the segment, the group, or the live lanes).
unsigned shuffle_source(const Warp &w, unsigned lane, unsigned group)
{
    const int width = w.width[lane];
    const long long first = lane & ~static_cast<unsigned>(width - 1), last = first + width - 1;
    const long long delta = static_cast<unsigned>(w.arg[lane]);
    long long src = lane;
    switch (w.op[lane]) {
    case WarpOp::Shfl: src = first + (w.arg[lane] & (width - 1)); break;
    case WarpOp::ShflUp: src = lane - delta; break;
    case WarpOp::ShflDown: src = lane + delta; break;
    // Lanes of earlier segments may be read, not of later ones.
    case WarpOp::ShflXor: src = lane ^ static_cast<unsigned>(w.arg[lane]); break;
    default: break;
    }
    const bool below = src < first && w.op[lane] != WarpOp::ShflXor;
    const bool above = src > last;
    return below || above || ((group >> src) & 1u) == 0 ? lane : static_cast<unsigned>(src);
}

// The result of vote or reduction `op` over the lanes `group`.
unsigned long long reduce(const Warp &w, WarpOp op, unsigned group)
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
    switch (op) {
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

// Completes the warp operation of the lanes `group` (every live lane of their common mask, all
// waiting at the same operation): computes each one's result and wakes them.
void complete_group(Launch &l, unsigned warp, unsigned group)
{
    Warp &w = l.warps[warp];
    const WarpOp op = w.op[first_lane(group)];
    const unsigned long long reduced = reduce(w, op, group);
    for (unsigned lane = 0; lane < 32; ++lane) {
        if (((group >> lane) & 1u) == 0)
            continue;
        switch (op) {
        case WarpOp::Sync: break;
        case WarpOp::Shfl:
        case WarpOp::ShflUp:
        case WarpOp::ShflDown:
        case WarpOp::ShflXor: w.out[lane] = w.in[shuffle_source(w, lane, group)]; break;
        case WarpOp::MatchAny: {
            unsigned matches = 0;
            for (unsigned m = 0; m < 32; ++m)
                if (((group >> m) & 1u) != 0 && w.in[m] == w.in[lane])
                    matches |= 1u << m;
            w.out[lane] = matches;
            break;
        }
        default: w.out[lane] = reduced;
        }
    }
    w.arrived &= ~group;
    for (unsigned lane = 0; lane < 32; ++lane)
        if ((group >> lane) & 1u)
            wake(l, warp * 32 + lane, State::AtWarpOp);
}

// The lanes of `mask` that are live and do not (yet) wait at an operation with this mask: those
// that an operation with `mask` waits for.
unsigned missing_lanes(const Warp &w, unsigned mask)
{
    unsigned missing = mask & w.live;
    for (unsigned lane = 0; lane < 32; ++lane)
        if (((w.arrived >> lane) & 1u) != 0 && w.mask[lane] == mask)
            missing &= ~(1u << lane);
    return missing;
}

// Completes the warp operation with `mask` if every live lane of the mask waits there; true if
// it did.
bool try_complete(Launch &l, unsigned warp, unsigned mask)
{
    const Warp &w = l.warps[warp];
    if (missing_lanes(w, mask) != 0)
        return false;
    complete_group(l, warp, mask & w.live);
    return true;
}

// The running thread returned from the kernel: it leaves its block's barriers and the masks of
// its warp's operations, which may thereby complete, and waits for the next block.
void exit_thread(Launch &l)
{
    const unsigned t = l.current, warp = t / 32, bit = 1u << (t % 32);
    Warp &w = l.warps[warp];
    l.state[t] = State::Exited;
    --l.live;
    w.live &= ~bit;
    for (unsigned lane = 0; lane < 32; ++lane)
        if (((w.arrived >> lane) & 1u) != 0 && (w.mask[lane] & bit) != 0)
            try_complete(l, warp, w.mask[lane]);
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

// Why block b cannot go on: no thread is ready, some still wait. At least one waits at a warp
// operation (threads that all wait at a block barrier complete it).
std::string deadlock(const Launch &l, unsigned b)
{
    const auto threads = static_cast<unsigned>(l.state.size());
    const auto at_block =
        static_cast<unsigned>(std::count(l.state.begin(), l.state.end(), State::AtBlockBarrier));
    unsigned t = 0;
    while (t + 1 < threads && l.state[t] != State::AtWarpOp)
        ++t;
    const Warp &w = l.warps[t / 32];
    const unsigned lane = t % 32;
    std::string where = format("%u at warp operations", l.live - at_block);
    if (at_block > 0)
        where += format(", %u at %s", at_block, name_of(l.kind));
    return format("block %u: deadlock: %s; thread %u waits at %s with mask 0x%08x for lanes "
                  "0x%08x of its warp, which wait elsewhere",
                  b, where.c_str(), t, name_of(w.op[lane]), w.mask[lane],
                  missing_lanes(w, w.mask[lane]));
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
    l.error = deadlock(l, b);
    return false;
}

// The kernel registered as `name`, or null.
const Kernel *find(std::string_view name)
{
    for (const std::span<const Kernel> table : kernel_tables())
        for (const Kernel &k : table)
            if (name == k.name)
                return &k;
    return nullptr;
}

// The layouts ("V,G") under which kernel `name` is registered (as name@V,G), or any kernel when
// `name` is null, without repeats, in the order of the tables.
std::vector<std::string> layouts_of(const char *name)
{
    std::vector<std::string> layouts;
    for (const std::span<const Kernel> table : kernel_tables())
        for (const Kernel &k : table) {
            const std::string_view full = k.name;
            const std::size_t at = full.find('@');
            if (at == std::string_view::npos || (name != nullptr && full.substr(0, at) != name))
                continue;
            std::string layout(full.substr(at + 1));
            if (std::find(layouts.begin(), layouts.end(), layout) == layouts.end())
                layouts.push_back(std::move(layout));
        }
    return layouts;
}

// The layouts, separated by spaces.
std::string join(const std::vector<std::string> &layouts)
{
    std::string s;
    for (const std::string &layout : layouts)
        s += (s.empty() ? "" : " ") + layout;
    return s;
}

// Why no kernel is found for `name` (with `layout`, when not null).
std::string unknown_kernel(const char *name, const char *layout)
{
    if (layout != nullptr) {
        const std::vector<std::string> known = layouts_of(nullptr);
        if (std::find(known.begin(), known.end(), layout) == known.end())
            return format("kernel %s: layout V,G = %s is not compiled into the emulator (build.rs "
                          "compiles V,G = %s)", name, layout, join(known).c_str());
        return format("no kernel '%s' is registered for layout V,G = %s, nor without a layout",
                      name, layout);
    }
    const std::vector<std::string> own = layouts_of(name);
    if (!own.empty())
        return format("kernel %s is registered per layout (V,G = %s): launch it with one", name,
                      join(own).c_str());
    return format("no kernel '%s' is registered in cuda/emulate/kernels.cpp", name);
}

// Runs kernel k (launched as `name`) on `grid` blocks of `block` threads with its parameters
// values at args[i]; the empty string on success, else why it failed.
std::string launch(const Kernel &k, const char *name, unsigned grid, unsigned block,
                   const void *const *args)
{
    if (block < 32 || block > max_block || block % 32 != 0)
        return format("kernel %s: blocks of %u threads; the emulator runs 32 to %u in multiples "
                      "of 32", name, block, max_block);
    if (grid < 1 || grid > max_grid)
        return format("kernel %s: a grid of %u blocks; 1 to %u are possible", name, grid, max_grid);

    const std::lock_guard lock(launch_mutex);
    if (!stacks.reserve(block))
        return format("kernel %s: cannot map %u stacks of %zu KiB", name, block,
                      stack_bytes / 1024);
    Launch l(k, args, block);
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

// Runs a launch of `name@layout` if registered (layout not null), else of `name`, with the
// argument block of `size` bytes at `args`: the kernel's one struct parameter, or its
// parameters one after another, each at the next multiple of its alignment (as a GPU reads a
// parameter buffer). The empty string on success, else why it failed.
std::string run(const char *name, const char *layout, unsigned grid, unsigned block,
                const void *args, unsigned long size)
{
    const Kernel *k = layout != nullptr ? find(std::string(name) + '@' + layout) : nullptr;
    if (k == nullptr)
        k = find(name);
    if (k == nullptr)
        return unknown_kernel(name, layout);
    name = k->name;
    const std::size_t arity = std::strlen(k->params);
    std::vector<const void *> fields;
    std::size_t at = 0;
    for (std::size_t i = 0; i < arity; ++i) {
        at = (at + k->aligns[i] - 1) / k->aligns[i] * k->aligns[i];
        fields.push_back(static_cast<const char *>(args) + at);
        at += k->sizes[i];
    }
    if (at != size)
        return format("kernel %s takes %zu bytes of arguments, %lu given", name, at, size);
    return launch(*k, name, grid, block, fields.data());
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
    // A waiting lane of `mask` whose own mask names this lane waits for it as this lane waits for
    // that one: both must be at the same operation with the same mask, or neither goes on.
    for (unsigned m = 0; m < 32; ++m) {
        if ((((w.arrived & mask) >> m) & 1u) == 0 || ((w.mask[m] >> lane) & 1u) == 0)
            continue;
        if (w.mask[m] != mask)
            fail("lanes %u and %u of warp %u wait for each other at warp operations with "
                 "different masks (%s with 0x%08x, %s with 0x%08x)",
                 m, lane, warp, name_of(w.op[m]), w.mask[m], name_of(op), mask);
        if (w.op[m] != op || w.width[m] != width)
            fail("lanes of warp %u reached different warp operations (%s, width %d, and %s, "
                 "width %d) with mask 0x%08x",
                 warp, name_of(w.op[m]), w.width[m], name_of(op), width, mask);
    }
    w.op[lane] = op;
    w.width[lane] = width;
    w.mask[lane] = mask;
    w.in[lane] = value;
    w.arg[lane] = arg;
    w.arrived |= 1u << lane;
    l.state[l.current] = State::AtWarpOp;
    if (!try_complete(l, warp, mask))
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

// Launches kernel `name` on `grid` blocks of `block` threads: the one registered as name@layout
// when `layout` ("V,G") is not null and that is registered, else `name`, with the argument
// block of `size` bytes at `args` (see hinoki_emu::run). Returns 0 when the launch ran to its
// end; otherwise non-zero with a one-line message in err (errlen bytes, NUL-terminated, cut where
// too long).
extern "C" int hinoki_emu_launch(const char *name, const char *layout, unsigned grid,
                                 unsigned block, const void *args, unsigned long size, char *err,
                                 unsigned long errlen) noexcept
{
    std::string error;
    try {
        error = hinoki_emu::run(name, layout, grid, block, args, size);
    } catch (const std::exception &e) {
        error = e.what();
    }
    if (error.empty())
        return 0;
    if (errlen > 0)
        std::snprintf(err, errlen, "%s", error.c_str());
    return 1;
}
