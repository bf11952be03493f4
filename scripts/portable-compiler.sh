#!/usr/bin/env bash
# Links a self-contained `tensorc` compiler into build/portable/tensorc: the
# build's own objects (scripts/build.sh first), with LLVM, zlib, terminfo,
# libstdc++ and libgcc linked statically (Debian's LLVM 19 static libraries)
# instead of libLLVM.so, stripped. What it needs at run time is glibc (2.36
# or newer: it runs on Ubuntu 24.04), libzstd.so.1 and the runtime library
# libtensorc_runtime.so.0 in ../lib beside it (the GPU bundle's layout), so the
# machine that runs PyTorch can compile graphs without LLVM/MLIR installed
# (`tensorc.torch.compile`, `torch.compile(backend="tensorc")`: $TENSORC).
#   scripts/portable-compiler.sh [OUT]     (default build/portable/tensorc)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/portable/tensorc}")
ninja -C build tensorc > /dev/null
llvm_lib=/usr/lib/llvm-19/lib
# The link command ninja runs for bin/tensorc, between its `: && ` and ` && :`.
cmd=$(ninja -C build -t commands bin/tensorc | tail -1)
cmd=${cmd#*: && }
cmd=${cmd%% && :*}
[[ $cmd == *" -o bin/tensorc "* && $cmd == *"$llvm_lib/libLLVM.so"* ]] ||
  { echo "portable-compiler: unexpected link command for bin/tensorc" >&2; exit 1; }
# Every LLVM component as a static library (the linker keeps what is
# referenced); Polly is not installed as a static library and not used.
static=$(llvm-config-19 --link-static --libs all | sed 's/-lPollyISL//; s/-lPolly//')
system="-Wl,--as-needed /usr/lib/x86_64-linux-gnu/libz.a /usr/lib/x86_64-linux-gnu/libtinfo.a"
system+=" /usr/lib/x86_64-linux-gnu/libzstd.so.1 -Wl,--no-as-needed"
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
cmd=$(sed -e "s| $llvm_lib/libLLVM.so[.0-9]*| -L$llvm_lib $static $system|" \
          -e "s| -o bin/tensorc | -o $tmp -static-libstdc++ -static-libgcc |" \
          -e "s|-Wl,-rpath,[^ ]*|-Wl,-rpath,\\\\\$ORIGIN/../lib|" <<< "$cmd")
(cd build && eval "$cmd")
strip "$tmp"
mv "$tmp" "$out"
trap - EXIT
# It needs (directly: the runtime library has its own) only these.
needed=$(readelf -d "$out" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
if [[ $needed != "ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libtensorc_runtime.so.0 libzstd.so.1 " ]]; then
  echo "portable-compiler: $out needs $needed" >&2
  exit 1
fi
LD_LIBRARY_PATH=build/lib "$out" --version > /dev/null
echo "portable-compiler: $out ($(du -h "$out" | cut -f1))"
