#!/usr/bin/env bash
# gpu_window.sh: the CUDA backend's check for a GPU node lent for a few
# minutes, built on a machine without a GPU and carried there.
#
#   scripts/gpu_window.sh pack [--arch 90] [--pack FILE]
#       On the build machine (no GPU needed): builds vitbench and
#       test_cuda_ops with the CUDA backend for sm_<arch> (build-gpu-window/,
#       C code for x86-64-v3 so that any recent x86 host runs it) and writes
#       one archive (default gpu_window/vitbench-gpu.tar.xz): the two
#       binaries, the shared libraries they need that a bare CUDA image may
#       lack (HDF5, OpenBLAS, Open MPI with its components, libyaml, cJSON,
#       cmocka and their dependencies), and a manifest. glibc, libstdc++ and
#       the CUDA libraries (cudart, cuBLASLt, CUPTI, cuDNN, NCCL) are not
#       carried: the GPU node's own are used, as its driver needs.
#   scripts/gpu_window.sh run [--pack FILE] [--out DIR] [--budget S] [--only LIST] [--full] [-- GPU_CHECK_FLAGS]
#       On the GPU node: unpacks the archive under /tmp, finds the CUDA
#       libraries there (the toolkit, then Python's nvidia-* packages), and
#       runs `gpu_check.sh --window` from the unpacked build: op tests,
#       sanitizer, golden losses, graphs, CUPTI and the base rows in at most
#       --budget seconds (default 270). The summary lands in DIR/summary.md
#       (default gpu_check_out/) and is printed. --only reruns some sections
#       (tests, golden, sanitize, cupti, base: gpu_check.sh's names). --full
#       runs them as gpu_check.sh --quick does, without a budget: every
#       golden and graphs case, CUPTI's cost A/B and its refusal under
#       compute-sanitizer, all base rows (not planes: no mpirun is carried).
#       Flags after -- go to gpu_check.sh (e.g. --rows bf16_best --nbatches 30).
#
# The archive stays under the 64 MiB a lent node's transfer takes; nothing in
# it is committed (gpu_window/ is ignored).
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)

die() { echo "gpu_window: $*" >&2; exit "${2:-1}"; }

verb=${1:-}
[ $# -gt 0 ] && shift
ARCH=90
PACK=$SRC/gpu_window/vitbench-gpu.tar.xz
OUTDIR=$SRC/gpu_check_out
BUDGET=270
ONLY=()
EXTRA=()
FULL=0
while [ $# -gt 0 ]; do
    case "$1" in
    --arch) ARCH=${2:?--arch needs a value}; shift ;;
    --pack) PACK=${2:?--pack needs a file}; shift ;;
    --out) OUTDIR=${2:?--out needs a directory}; shift ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift ;;
    --only) ONLY=(--only "${2:?--only needs a list of sections}"); shift ;;
    --full) FULL=1 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h | --help) sed -n 2,33p "$0"; exit 0 ;;
    *) die "unknown flag '$1' (see --help)" 2 ;;
    esac
    shift
done
[[ $ARCH =~ ^[0-9]+a?$ ]] || die "--arch: '$ARCH' is not a CUDA architecture number (e.g. 90)" 2
[[ $BUDGET =~ ^[0-9]+$ ]] && [ "$BUDGET" -ge 60 ] || die "--budget: '$BUDGET' must be whole seconds, at least 60" 2

# the libraries every Linux host has, and the CUDA ones that must match its driver
not_carried() {
    case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | \
        libutil.so.* | libresolv.so.* | libstdc++.so.* | libgcc_s.so.* | \
        libcuda.so.* | libcudart.so.* | libcublas*.so.* | libcupti.so.* | libcudnn*.so.* | libnccl.so.* | libnvrtc*.so.*)
        return 0 ;;
    esac
    return 1
}

pack() {
    command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "pack: no nvcc: the CUDA toolkit is needed to build"
    local build=$SRC/build-gpu-window logs
    logs=$(dirname "$PACK")
    mkdir -p "$logs" || die "pack: cannot create $logs"
    echo "gpu_window: building for sm_$ARCH in $build"
    cmake -S "$SRC" -B "$build" -DCMAKE_BUILD_TYPE=Release -DVB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
        -DVB_MARCH=x86-64-v3 -DCMAKE_SKIP_BUILD_RPATH=ON "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,\$ORIGIN/../lib" \
        > "$logs/cmake.log" 2>&1 || { tail -n 20 "$logs/cmake.log" >&2; die "pack: configure failed"; }
    cmake --build "$build" -j "$(nproc)" --target vitbench test_cuda_ops > "$logs/build.log" 2>&1 ||
        { grep -E "error" "$logs/build.log" | head -n 20 >&2; die "pack: build failed ($logs/build.log)"; }

    local stage
    stage=$(mktemp -d /tmp/vb_window.XXXXXX) || die "pack: mktemp"
    trap 'rm -rf "$stage"' RETURN
    mkdir -p "$stage/bin" "$stage/lib" "$stage/mca" "$stage/pmix"
    cp "$build/vitbench" "$build/test_cuda_ops" "$stage/bin/"
    strip --strip-unneeded "$stage/bin/"* 2> /dev/null
    # the binaries find the carried libraries through their RPATH ($ORIGIN/../lib,
    # which, unlike a RUNPATH, also serves the libraries' own dependencies and
    # Open MPI's components), so that nothing else run there (python3,
    # compute-sanitizer) sees them
    readelf -d "$stage/bin/vitbench" | grep -q 'RPATH.*\$ORIGIN/\.\./lib' || die "pack: vitbench has no RPATH \$ORIGIN/../lib"

    # Open MPI's components are loaded at MPI_Init from its component
    # directory; Debian's build keeps PMIx's in a directory of its own
    local mpilib ompi_mca pmix_mca
    mpilib=$(ldd "$build/vitbench" | awk '$1 == "libmpi.so.40" { print $3 }')
    [ -n "$mpilib" ] || die "pack: vitbench links no libmpi.so.40"
    ompi_mca=$(dirname "$(readlink -f "$mpilib")")/openmpi/lib/openmpi3
    [ -d "$ompi_mca" ] || ompi_mca=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
    [ -d "$ompi_mca" ] || die "pack: Open MPI's component directory not found"
    cp "$ompi_mca"/*.so "$stage/mca/"
    pmix_mca=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
    [ -d "$pmix_mca" ] && cp "$pmix_mca"/*.so "$stage/pmix/"

    # every shared library the binaries and the PMIx components need, and the
    # PMIx library the pmix component links; the other components' own
    # dependencies (verbs, UCX, libfabric) are not carried: those components
    # then fail to load, and a single-node run needs none of them
    # OpenBLAS is not linked but loaded with dlopen from the path configured
    # here (kernels/cpu/blas.h), which the node lacks: it is carried, and run
    # names it in VB_OPENBLAS_LIBRARY
    local blas
    blas=$(sed -n 's/^OPENBLAS_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
    blas=$(readlink -f "$blas")
    [ -f "$blas" ] || die "pack: the configured OpenBLAS library ($blas) is not there"
    cp -L "$blas" "$stage/lib/"
    local objs=("$build/vitbench" "$build/test_cuda_ops" "$blas" "$ompi_mca"/mca_pmix_*.so)
    [ -d "$pmix_mca" ] && objs+=("$pmix_mca"/*.so)
    ldd "${objs[@]}" 2> /dev/null | awk 'NF >= 3 && $2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
        while read -r name path; do
            not_carried "$name" && continue
            cp -L "$path" "$stage/lib/$name"
        done
    [ -f "$stage/lib/libmpi.so.40" ] || die "pack: libmpi.so.40 was not collected"
    strip --strip-unneeded "$stage/lib/"*.so* "$stage/mca/"*.so "$stage/pmix/"*.so 2> /dev/null
    # Debian's Open MPI libraries carry a RUNPATH, and the loader ignores the
    # executable's RPATH for the dependencies of a library that has one: it
    # would take libopen-rte and libpmix from the node's own directories (a
    # different Open MPI there). Their RUNPATH entries become RPATH entries,
    # searched first and naming a directory the node lacks.
    python3 - "$stage"/lib/*.so* "$stage"/mca/*.so "$stage"/pmix/*.so << 'PY' || die "pack: cannot rewrite RUNPATH"
import struct, sys
DT_RPATH, DT_RUNPATH = 15, 29
for path in sys.argv[1:]:
    with open(path, "r+b") as f:
        ehdr = f.read(64)
        if ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
            sys.exit("%s: not a little-endian ELF64 file" % path)
        phoff, = struct.unpack_from("<Q", ehdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", ehdr, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            p_type, _, p_offset, _, _, p_filesz = struct.unpack("<IIQQQQ", f.read(40))
            if p_type != 2:  # PT_DYNAMIC
                continue
            for off in range(p_offset, p_offset + p_filesz, 16):
                f.seek(off)
                tag, = struct.unpack("<q", f.read(8))
                if tag == 0:
                    break
                if tag == DT_RUNPATH:
                    f.seek(off)
                    f.write(struct.pack("<q", DT_RPATH))
PY

    {
        echo "vitbench gpu window pack"
        echo "commit $(git rev-parse --short=12 HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' (dirty)')"
        echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) for sm_$ARCH, C code -march=x86-64-v3"
        echo "nvcc $(nvcc --version 2> /dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
        echo "needs from the GPU node: $(ldd "$build/vitbench" | awk '{ print $1 }' | while read -r n; do
            case "$n" in libcuda*.so.* | libcublas*.so.* | libcupti.so.* | libcudnn*.so.* | libnccl.so.*) printf '%s ' "$n" ;; esac
        done)"
    } > "$stage/MANIFEST"

    mkdir -p "$(dirname "$PACK")" || die "pack: cannot create $(dirname "$PACK")"
    tar -C "$stage" -cf - . | xz -T0 -6 > "$PACK.tmp" && mv "$PACK.tmp" "$PACK" || die "pack: cannot write $PACK"
    local mib
    mib=$(du -m "$PACK" | cut -f1)
    echo "gpu_window: $PACK: $mib MiB ($(find "$stage" -type f | wc -l) files)"
    [ "$mib" -lt 56 ] || echo "gpu_window: warning: $mib MiB leaves little of a 64 MiB transfer for the tree" >&2
}

# on the GPU node: add the directory holding each CUDA library vitbench needs
# and the loader does not find, searching the toolkit and Python's packages
find_cuda_libs() {
    local bin=$1 roots=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/extras/CUPTI/lib64 /usr/local/nvidia/lib64)
    local sp
    for py in python3 /opt/torch/.venv/bin/python3; do
        sp=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2> /dev/null) || continue
        for d in $sp; do roots+=("$d/nvidia" "$d/torch/lib"); done
    done
    local missing n hit
    missing=$(ldd "$bin" | awk '$3 == "not" { print $1 }')
    for n in $missing; do
        hit=""
        for r in "${roots[@]}"; do
            [ -d "$r" ] || continue
            hit=$(find "$r" -maxdepth 3 -name "$n" -print -quit 2> /dev/null)
            [ -n "$hit" ] && break
        done
        [ -n "$hit" ] || die "run: $n not found on this machine (looked in ${roots[*]})"
        LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$hit")
        export LD_LIBRARY_PATH
    done
    missing=$(ldd "$bin" | awk '$3 == "not" { print $1 }')
    [ -z "$missing" ] || die "run: still unresolved: $missing"
}

run() {
    [ -f "$PACK" ] || die "run: no pack $PACK (make it with 'scripts/gpu_window.sh pack' and carry it)" 2
    local t0 root
    t0=$(date +%s)
    root=$(mktemp -d /tmp/vb_window.XXXXXX) || die "run: mktemp"
    xz -dc "$PACK" | tar -C "$root" -xf - || die "run: cannot unpack $PACK"
    mkdir -p "$OUTDIR" || die "run: cannot create $OUTDIR"
    find_cuda_libs "$root/bin/vitbench"
    local blas
    blas=$(find "$root/lib" -maxdepth 1 -name 'libopenblas*.so*' -print -quit)
    [ -n "$blas" ] || die "run: the pack carries no OpenBLAS library (pack it again)"
    export VB_OPENBLAS_LIBRARY=$blas
    # Open MPI from the pack: its components, no orted for a singleton, quiet
    # about the components whose network libraries this node lacks
    export OMPI_MCA_mca_base_component_path=$root/mca PMIX_MCA_mca_base_component_path=$root/pmix
    export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_mca_base_component_show_load_errors=0
    export OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_btl=self,vader
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    {
        sed -n 2,3p "$root/MANIFEST"
        echo "unpacked in $(($(date +%s) - t0)) s; CUDA libraries: $(ldd "$root/bin/vitbench" |
            awk '$1 ~ /^lib(cudart|cublasLt|cupti|cudnn|nccl)\.so/ { printf "%s ", $3 }')"
    } > "$OUTDIR/pack.txt"
    local mode=(--window --budget "$BUDGET")
    if [ $FULL = 1 ]; then
        mode=(--prebuilt --quick)
        [ ${#ONLY[@]} = 0 ] && ONLY=(--only tests,golden,sanitize,cupti,base)
    fi
    BUILD_DIR=$root/bin bash "$SRC/scripts/gpu_check.sh" "${mode[@]}" "${ONLY[@]}" "${EXTRA[@]}" --out "$OUTDIR" 2>&1 |
        tee "$OUTDIR/summary.md"
    return "${PIPESTATUS[0]}"
}

case "$verb" in
pack) pack ;;
run) run ;;
-h | --help | "") sed -n 2,33p "$0"; [ -n "$verb" ] && exit 0; exit 2 ;;
*) die "unknown verb '$verb' (pack or run)" 2 ;;
esac
