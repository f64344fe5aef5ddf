#!/usr/bin/env python3
"""Compiles the CUDA kernels of cuda/ with NVRTC, as hinoki does at start-up, for every
(V, G) layout hinoki accepts and two GPU generations, and the stage program (cuda/build.cu,
groups.cu, particles.cu, domain.cu, lets.cu, integrate.cu: IEEE arithmetic), so that a kernel that does not
compile is found without a GPU.

Usage: scripts/check_kernels.py
NVRTC is libnvrtc from the system (HINOKI_NVRTC=/path/libnvrtc.so, or the loader's search), or
else NVIDIA's PyPI wheel nvidia-cuda-nvrtc-cu12, fetched once into target/nvrtc. Where neither
can be had, the check says why and is skipped (exit 0); a compile error exits 1 with NVRTC's log.
"""
import ctypes
import ctypes.util
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEEL_DIR = os.path.join(ROOT, "target", "nvrtc")
INCLUDES = ['#include "gravity.cuh"', '#include "periodic.cuh"']


def wheel_library():
    """libnvrtc from the PyPI wheel, downloaded into target/nvrtc on first use."""
    found = glob.glob(os.path.join(WHEEL_DIR, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.*"))
    if not found:
        os.makedirs(WHEEL_DIR, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "nvidia-cuda-nvrtc-cu12", "-d", WHEEL_DIR],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        import zipfile
        for whl in glob.glob(os.path.join(WHEEL_DIR, "*.whl")):
            zipfile.ZipFile(whl).extractall(WHEEL_DIR)
        found = glob.glob(os.path.join(WHEEL_DIR, "nvidia", "cuda_nvrtc", "lib",
                                       "libnvrtc.so.*"))
    return sorted(found)[0] if found else None


def nvrtc():
    for path in [os.environ.get("HINOKI_NVRTC"), ctypes.util.find_library("nvrtc")]:
        if path:
            try:
                return ctypes.CDLL(path)
            except OSError:
                pass
    path = wheel_library()
    return ctypes.CDLL(path) if path else None


def without_includes(source):
    """A source without its includes of the headers the programs hold once, first."""
    for include in INCLUDES:
        source = source.replace(include, "")
    return source


def program():
    """The walk program hinoki hands NVRTC (src/gpu/context.rs, walk_source)."""
    parts = [open(os.path.join(ROOT, "cuda", h)).read()
             for h in ["cells.cuh", "gravity.cuh", "periodic.cuh"]]
    for name in ["walk.cu", "walk_list.cu", "direct.cu", "unsort.cu"]:
        parts.append(without_includes(open(os.path.join(ROOT, "cuda", name)).read()))
    return "\n".join(parts).encode()


def compile_once(lib, src, options):
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"hinoki.cu", 0, None, None) != 0:
        return 1, "nvrtcCreateProgram failed"
    opts = [o.encode() for o in options]
    result = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return result, log.value.decode(errors="replace")


def main():
    lib = nvrtc()
    if lib is None:
        print("skipping the kernel compile check: no libnvrtc on this machine and the "
              "nvidia-cuda-nvrtc-cu12 wheel could not be fetched")
        return 0
    src = program()
    layouts = [(v, 32) for v in (1, 2, 3, 4, 8, 16)] + [(2, 16), (4, 16), (4, 8), (1, 4), (16, 1)]
    failed = 0
    for arch in ["compute_80", "compute_90"]:
        for v, g in layouts:
            options = [f"-arch={arch}", "--use_fast_math", f"-DHINOKI_V={v}",
                       f"-DHINOKI_G={g}", "-std=c++17"]
            result, log = compile_once(lib, src, options)
            if result != 0:
                failed += 1
                print(f"{arch} V,G = {v},{g}: NVRTC error {result}\n{log}")
    total = 2 * len(layouts)
    print(f"kernels compiled for {total - failed} of {total} (arch, V, G) combinations")
    # The stage program (src/gpu/context.rs, stage_source): cells.cuh, gravity.cuh, then the stages'
    # kernels, no fast math, no FMA contraction.
    parts = [open(os.path.join(ROOT, "cuda", h)).read() for h in ["cells.cuh", "gravity.cuh"]]
    for name in ["build.cu", "groups.cu", "particles.cu", "domain.cu", "lets.cu", "integrate.cu"]:
        parts.append(without_includes(open(os.path.join(ROOT, "cuda", name)).read()))
    stages = "\n".join(parts).encode()
    for arch in ["compute_80", "compute_90"]:
        result, log = compile_once(lib, stages, [f"-arch={arch}", "--fmad=false", "-std=c++17"])
        if result != 0:
            failed += 1
            print(f"{arch} stage program: NVRTC error {result}\n{log}")
    if not failed:
        print("stage kernels compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
