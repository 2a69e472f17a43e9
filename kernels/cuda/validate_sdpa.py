#!/usr/bin/env python3
"""Validate semroute's CUDA flash-attention kernel against PyTorch.

STATUS: written without access to a GPU. The kernel source compiles to PTX
(sm_80, sm_90) with NVRTC, but neither the kernel nor this script has run on a
GPU yet. Run it on a CUDA machine (sm_80 or newer) with PyTorch:

    python3 kernels/cuda/validate_sdpa.py                 # correctness + timings
    python3 kernels/cuda/validate_sdpa.py --quick         # smaller sweep
    python3 kernels/cuda/validate_sdpa.py --compile-only  # no GPU needed

Compilation: with `nvcc` (PATH or $CUDA_HOME) it builds the shared library via
`build.sh` and calls `semroute_flash_attention_fwd` through ctypes; without it
(the usual pip-installed PyTorch), it compiles the kernels with NVRTC (from the
`nvidia-cuda-nvrtc` wheel PyTorch depends on) and launches them through the
CUDA driver API. No network access is needed.

What it checks:
  1. correctness against an exact fp32 reference (query-chunked, so it fits
     at long lengths) for fp16, bf16 and fp32 inputs, head_dim 32/64/128,
     odd lengths, padding (-inf and finfo.min biases) and sliding windows;
     errors are measured on unpadded query rows;
  2. agreement with and speed against PyTorch SDPA: the flash backend for
     unmasked global attention, the memory-efficient backend with a
     materialised mask for padding and windows, at 512 to 32K tokens, with
     peak memory per call.
Exit status 1 if any correctness check fails.
"""

import argparse
import ctypes
import ctypes.util
import glob
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "flash_attn.cu")
DTYPE_CODES = {"fp16": 0, "bf16": 1, "fp32": 2}
HEAD_DIMS = (32, 64, 128)
BLOCK_M = 64
THREADS = 128


def smem_bytes(head_dim):
    """Dynamic shared memory per CTA; mirrors semroute::Layout in flash_attn.cu."""
    ldt, ldp, lds, ldo = head_dim + 8, 64 + 8, 64 + 4, head_dim + 4
    return 64 * ldt * 2 * 3 + 64 * ldp * 2 + 64 * lds * 4 + 64 * ldo * 4 + 3 * 64 * 4


# ----------------------------------------------------------------- compilers


def find_nvcc():
    nvcc = shutil.which("nvcc")
    if nvcc:
        return nvcc
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return None


def _nvidia_wheel_dirs(sub):
    """Directories `<site-packages>/nvidia/<pkg>/<sub>` of NVIDIA's pip wheels."""
    found = []
    for path in sys.path:
        found += glob.glob(os.path.join(path, "nvidia", "*", sub))
    return found


def find_nvrtc():
    explicit = os.environ.get("SEMROUTE_NVRTC")
    candidates = [explicit] if explicit else []
    for d in _nvidia_wheel_dirs("lib"):
        candidates += sorted(glob.glob(os.path.join(d, "libnvrtc.so*")))
    lib = ctypes.util.find_library("nvrtc")
    if lib:
        candidates.append(lib)
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            candidates += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")))
    for c in candidates:
        if c and "builtins" not in c and "alt" not in os.path.basename(c):
            try:
                return ctypes.CDLL(c), c
            except OSError:
                continue
    return None, None


def include_dirs():
    dirs = []
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.isdir(os.path.join(home, "include")):
            dirs.append(os.path.join(home, "include"))
    dirs += _nvidia_wheel_dirs("include")
    return [d for d in dirs if os.path.isdir(d)]


def nvrtc_compile(arch):
    """Compiles the kernels (not the host launcher) to PTX for compute_<arch>."""
    nvrtc, path = find_nvrtc()
    if nvrtc is None:
        raise RuntimeError("neither nvcc nor NVRTC found (install nvidia-cuda-nvrtc or a CUDA toolkit)")
    with open(SOURCE, "rb") as f:
        src = f.read()
    prog = ctypes.c_void_p()
    check = lambda r, what: (_ for _ in ()).throw(RuntimeError(f"{what} failed: {r}")) if r else None
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"flash_attn.cu", 0, None, None),
          "nvrtcCreateProgram")
    opts = [f"--gpu-architecture=compute_{arch}".encode(), b"-std=c++17", b"-default-device"]
    opts += [f"-I{d}".encode() for d in include_dirs()]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    res = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if res != 0:
        raise RuntimeError(f"NVRTC ({path}) failed:\n{log.value.decode(errors='replace')}")
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(prog, ptx)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.raw, path, log.value.decode(errors="replace").strip()


def nvcc_build(nvcc, arch):
    out_dir = tempfile.mkdtemp(prefix="semroute-cuda-")
    env = dict(os.environ, NVCC=nvcc, OUT_DIR=out_dir, CUDA_ARCHS=str(arch))
    subprocess.run(["bash", os.path.join(HERE, "build.sh")], check=True, env=env)
    lib = os.path.join(out_dir, "libsemroute_flash_cuda.so")
    if not os.path.isfile(lib):
        raise RuntimeError("build.sh produced no library")
    return lib


# ------------------------------------------------------------------ launchers


class NvccKernels:
    """The nvcc-built shared library with its host launcher."""

    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(lib_path)
        f = self.lib.semroute_flash_attention_fwd
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_void_p, ctypes.c_longlong,
                     ctypes.c_void_p] + [ctypes.c_int] * 5 + [ctypes.c_float, ctypes.c_int,
                     ctypes.c_int, ctypes.c_void_p]
        self.name = f"nvcc library {lib_path}"

    def run(self, dtype, q, k, v, bias, bias_stride, out, scale, wl, wr, stream):
        b, h, sq, d = q.shape
        skv = k.shape[2]
        r = self.lib.semroute_flash_attention_fwd(
            DTYPE_CODES[dtype], q.data_ptr(), k.data_ptr(), v.data_ptr(),
            bias.data_ptr() if bias is not None else None, bias_stride, out.data_ptr(),
            b, h, sq, skv, d, scale, wl, wr, stream)
        if r != 0:
            raise RuntimeError(f"semroute_flash_attention_fwd returned cudaError {r}")


class DriverKernels:
    """NVRTC-compiled PTX, launched through the CUDA driver API."""

    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, ptx):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.module = ctypes.c_void_p()
        err = self.cuda.cuModuleLoadData(ctypes.byref(self.module), ctypes.c_char_p(ptx))
        if err:
            raise RuntimeError(f"cuModuleLoadData failed: {err}")
        self.funcs = {}
        self.name = "NVRTC PTX via the driver API"

    def func(self, dtype, d):
        key = (dtype, d)
        if key not in self.funcs:
            f = ctypes.c_void_p()
            name = f"semroute_fa_fwd_{dtype.replace('fp', 'f')}_d{d}".encode()
            err = self.cuda.cuModuleGetFunction(ctypes.byref(f), self.module, name)
            if err:
                raise RuntimeError(f"cuModuleGetFunction({name}) failed: {err}")
            err = self.cuda.cuFuncSetAttribute(
                f, self.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes(d))
            if err:
                raise RuntimeError(f"cuFuncSetAttribute failed: {err}")
            self.funcs[key] = f
        return self.funcs[key]

    def run(self, dtype, q, k, v, bias, bias_stride, out, scale, wl, wr, stream):
        b, h, sq, d = q.shape
        skv = k.shape[2]
        f = self.func(dtype, d)
        args = [ctypes.c_void_p(q.data_ptr()), ctypes.c_void_p(k.data_ptr()),
                ctypes.c_void_p(v.data_ptr()),
                ctypes.c_void_p(bias.data_ptr() if bias is not None else 0),
                ctypes.c_longlong(bias_stride), ctypes.c_void_p(out.data_ptr()),
                ctypes.c_int(h), ctypes.c_int(sq), ctypes.c_int(skv), ctypes.c_float(scale),
                ctypes.c_int(wl), ctypes.c_int(wr)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p)
                                                 for a in args])
        grid_x = (sq + BLOCK_M - 1) // BLOCK_M
        err = self.cuda.cuLaunchKernel(f, grid_x, b * h, 1, THREADS, 1, 1, smem_bytes(d),
                                       ctypes.c_void_p(stream), params, None)
        if err:
            raise RuntimeError(f"cuLaunchKernel failed: {err}")


# ------------------------------------------------------------------ checks


def make_bias(torch, batch, seq, kind, device):
    """[batch, 1, 1, seq] fp32 key bias: row 0 unpadded, the others padded over
    their last quarter; or None."""
    if kind == "none":
        return None, torch.ones(batch, seq, dtype=torch.bool, device=device)
    keep = torch.ones(batch, seq, dtype=torch.bool, device=device)
    keep[1:, seq - seq // 4:] = False
    value = float("-inf") if kind == "-inf" else torch.finfo(torch.float32).min
    bias = torch.zeros(batch, seq, dtype=torch.float32, device=device)
    bias[~keep] = value
    return bias.view(batch, 1, 1, seq).contiguous(), keep


def window_mask(torch, i0, i1, skv, wl, wr, device):
    i = torch.arange(i0, i1, device=device).view(-1, 1)
    j = torch.arange(skv, device=device).view(1, -1)
    ok = torch.ones(i1 - i0, skv, dtype=torch.bool, device=device)
    if wl >= 0:
        ok &= j >= i - wl
    if wr >= 0:
        ok &= j <= i + wr
    return ok


def reference(torch, q, k, v, bias, scale, wl, wr, chunk=1024):
    """Exact fp32 attention, query-chunked; fully masked rows give zeros."""
    b, h, sq, d = q.shape
    skv = k.shape[2]
    kf, vf = k.float(), v.float()
    out = torch.empty(b, h, sq, d, dtype=torch.float32, device=q.device)
    for i0 in range(0, sq, chunk):
        i1 = min(sq, i0 + chunk)
        s = torch.matmul(q[:, :, i0:i1].float(), kf.transpose(-1, -2)) * scale
        if bias is not None:
            s = s + bias
        s = s.masked_fill(~window_mask(torch, i0, i1, skv, wl, wr, q.device), float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        out[:, :, i0:i1] = torch.matmul(p, vf)
    return out


def sdpa_mask(torch, bias, keep, sq, skv, wl, wr, dtype, device):
    """Materialised additive mask for SDPA (quadratic memory, as the original graphs)."""
    m = torch.zeros(keep.shape[0], 1, sq, skv, dtype=dtype, device=device)
    allowed = window_mask(torch, 0, sq, skv, wl, wr, device).view(1, 1, sq, skv)
    allowed = allowed & keep.view(keep.shape[0], 1, 1, skv)
    return m.masked_fill(~allowed, float("-inf"))


def timed(torch, fn, iters):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def peak_bytes(torch, fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compile-only", action="store_true", help="compile with NVRTC/nvcc and stop")
    ap.add_argument("--arch", type=int, default=None, help="compute capability, e.g. 90 (default: the GPU's)")
    ap.add_argument("--compiler", choices=("auto", "nvcc", "nvrtc"), default="auto")
    ap.add_argument("--quick", action="store_true", help="fewer correctness cases, timings up to 8K")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--lengths", default="512,2048,8192,16384,32768")
    args = ap.parse_args()

    if args.compile_only:
        arch = args.arch or 80
        nvcc = find_nvcc() if args.compiler in ("auto", "nvcc") else None
        if nvcc:
            print("built", nvcc_build(nvcc, arch))
        else:
            for a in sorted({arch, 90}):
                ptx, path, log = nvrtc_compile(a)
                entries = [l.split()[-1].rstrip("(") for l in ptx.decode().splitlines()
                           if l.startswith(".visible .entry")]
                print(f"NVRTC {path}: compute_{a} PTX {len(ptx)} bytes, {len(entries)} kernels")
                if log:
                    print(log)
        return 0

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("no CUDA device: run with --compile-only, or on a GPU machine")
        return 1
    dev = torch.device("cuda")
    cap = torch.cuda.get_device_capability()
    arch = args.arch or cap[0] * 10 + cap[1]
    if arch < 80:
        print(f"compute capability {arch}: the kernel needs sm_80 or newer")
        return 1
    nvcc = find_nvcc() if args.compiler in ("auto", "nvcc") else None
    if args.compiler == "nvcc" and not nvcc:
        print("nvcc not found")
        return 1
    torch.cuda.init()
    torch.zeros(1, device=dev)  # make the primary context current
    if nvcc:
        kernels = NvccKernels(nvcc_build(nvcc, arch))
    else:
        ptx, path, _ = nvrtc_compile(arch)
        kernels = DriverKernels(ptx)
    print(f"# semroute CUDA flash attention vs PyTorch {torch.__version__} on "
          f"{torch.cuda.get_device_name()} (sm_{arch}); kernels: {kernels.name}")

    def ours(dtype, q, k, v, bias, scale, wl, wr):
        out = torch.empty_like(q)
        stride = 0 if bias is None or bias.shape[0] == 1 else bias.shape[-1]
        kernels.run(dtype, q, k, v, bias, stride, out, scale, wl, wr,
                    torch.cuda.current_stream().cuda_stream)
        return out

    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    tol = {"fp16": 4e-3, "bf16": 3e-2, "fp32": 4e-3}
    failures = 0

    # 1. correctness against exact fp32 attention
    print("\n## correctness (max |ours - exact| / max |exact|, unpadded query rows)\n")
    print("| dtype | head_dim | tokens | window | padding | rel. error | ok |")
    print("|---|---:|---:|---|---|---:|---|")
    lengths = (77, 511, 2048) if args.quick else (77, 511, 2048, 8192)
    windows = ((-1, -1), (64, 64), (128, 0))
    torch.manual_seed(0)
    for dtype in ("fp16", "bf16", "fp32"):
        for d in HEAD_DIMS:
            for n in lengths:
                for wl, wr in windows:
                    for pad in ("none", "-inf", "min"):
                        if args.quick and d == 32 and pad == "min":
                            continue
                        b, h = 2, 4
                        q = torch.randn(b, h, n, d, device=dev, dtype=tdt[dtype])
                        k = torch.randn(b, h, n, d, device=dev, dtype=tdt[dtype])
                        v = torch.randn(b, h, n, d, device=dev, dtype=tdt[dtype])
                        bias, keep = make_bias(torch, b, n, pad, dev)
                        scale = 1.0 / math.sqrt(d)
                        got = ours(dtype, q, k, v, bias, scale, wl, wr).float()
                        want = reference(torch, q, k, v, bias, scale, wl, wr)
                        rows = keep.view(b, 1, n, 1).expand_as(want)
                        err = ((got - want).abs() * rows).max().item() / max(want.abs().max().item(), 1e-6)
                        ok = err <= tol[dtype] and not torch.isnan(got).any().item()
                        failures += not ok
                        win = "global" if wl < 0 else f"-{wl}/+{wr}"
                        print(f"| {dtype} | {d} | {n} | {win} | {pad} | {err:.2e} | {'yes' if ok else 'NO'} |")

    # 2. speed and memory against SDPA
    print(f"\n## timings, batch 1, {args.heads} heads, head_dim 64 (ms, best of 5; peak = extra GPU memory of one call)\n")
    print("| tokens | dtype | case | ours ms | SDPA ms | SDPA backend | ours peak MiB | SDPA peak MiB | max |ours - SDPA| |")
    print("|---:|---|---|---:|---:|---|---:|---:|---:|")
    max_len = 8192 if args.quick else 10 ** 9
    for n in [int(x) for x in args.lengths.split(",") if int(x) <= max_len]:
        for dtype in ("fp16", "bf16"):
            b, h, d = 1, args.heads, 64
            q = torch.randn(b, h, n, d, device=dev, dtype=tdt[dtype])
            k = torch.randn(b, h, n, d, device=dev, dtype=tdt[dtype])
            v = torch.randn(b, h, n, d, device=dev, dtype=tdt[dtype])
            scale = 1.0 / math.sqrt(d)
            cases = [("global", -1, -1, "none"), ("window -64/+64", 64, 64, "none"),
                     ("global + padding", -1, -1, "-inf")]
            for name, wl, wr, pad in cases:
                bias, keep = make_bias(torch, b if pad == "none" else 2, n, pad, dev)
                if pad != "none":
                    q2, k2, v2 = (torch.cat([t, t]) for t in (q, k, v))
                else:
                    q2, k2, v2 = q, k, v
                run_ours = lambda: ours(dtype, q2, k2, v2, bias, scale, wl, wr)
                if wl < 0 and pad == "none":
                    backend, mask = SDPBackend.FLASH_ATTENTION, None
                else:
                    backend = SDPBackend.EFFICIENT_ATTENTION
                    mask = None
                    try:
                        mask = sdpa_mask(torch, bias, keep, n, n, wl, wr, tdt[dtype], dev)
                    except torch.cuda.OutOfMemoryError:
                        backend = None

                def run_sdpa():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask, scale=scale)

                iters = 5 if n <= 8192 else 2
                t_ours = timed(torch, run_ours, iters)
                p_ours = peak_bytes(torch, run_ours) / 2 ** 20
                try:
                    if backend is None:
                        raise torch.cuda.OutOfMemoryError("mask")
                    t_sdpa = timed(torch, run_sdpa, iters)
                    p_sdpa = peak_bytes(torch, run_sdpa) / 2 ** 20 + (
                        mask.numel() * mask.element_size() / 2 ** 20 if mask is not None else 0)
                    diff = (run_ours().float() - run_sdpa().float())
                    if pad != "none":
                        diff = diff * keep.view(-1, 1, n, 1)
                    diff = diff.nan_to_num(0).abs().max().item()
                    sdpa_ms, sdpa_peak, diff_s = f"{t_sdpa:.2f}", f"{p_sdpa:.0f}", f"{diff:.2e}"
                except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
                    sdpa_ms, sdpa_peak, diff_s = "-", f"failed: {type(e).__name__}", "-"
                bname = backend.name.lower() if backend is not None else "-"
                print(f"| {n} | {dtype} | {name} | {t_ours:.2f} | {sdpa_ms} | {bname} | {p_ours:.0f} | {sdpa_peak} | {diff_s} |")
                del mask
                torch.cuda.empty_cache()

    print(f"\n{'all correctness checks passed' if failures == 0 else f'{failures} correctness check(s) FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
