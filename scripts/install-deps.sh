#!/bin/sh
# install-deps.sh - install the Debian 12 packages srgeo needs, only those
# missing.  Runs as root (or through sudo when available).
#   sh scripts/install-deps.sh          build + test + demo dependencies
#   sh scripts/install-deps.sh --test   also Chromium, which the test suite
#                                       uses to render a notebook report, and
#                                       LuaRocks, to build the rockspec, and
#                                       clang + libFuzzer for make fuzz (CI),
#                                       and ONNX's backend node tests
#                                       (libonnx-testdata), run through the
#                                       ONNX importer, Jupyter's client and
#                                       nbconvert, which drive srgeo kernel, and
#                                       nbformat, to validate the .ipynb srgeo
#                                       notebook --to ipynb writes
#                                       and onnxruntime-node (npm, into
#                                       build/ort; not in Debian), the second
#                                       reference of the ONNX importer
#   sh scripts/install-deps.sh --torch  also PyTorch, for regenerating fixtures
#                                       and the comparison benchmarks
set -e
ORT=""
PKGS="build-essential pkg-config lua5.4 liblua5.4-dev libopenblas-dev libvips-dev libvips-tools
gnuplot-nox libreadline-dev libcjson-dev zlib1g-dev libcmark-gfm-dev libcmark-gfm-extensions-dev dataset-fashion-mnist tmux
libonnx-dev protobuf-c-compiler libprotobuf-c-dev
openmpi-bin libopenmpi-dev libzmq3-dev libcurl4-openssl-dev"
for a in "$@"; do
    case "$a" in
    --test) ORT=1; PKGS="$PKGS chromium luarocks clang libclang-rt-14-dev libomp-14-dev libonnx-testdata python3-nbformat python3-jupyter-client jupyter-nbconvert" ;;
    --torch) PKGS="$PKGS python3-torch python3-torchvision python3-numpy" ;;
    *) echo "install-deps: unknown option $a (--test, --torch)" >&2; exit 2 ;;
    esac
done

# onnxruntime-node from npm (--ignore-scripts: its post-install fetches GPU
# binaries from a host that may be unreachable; the CPU runtime is in the
# package).  Pinned: the version onnx_spec's cross-check was written against.
ort() {
    [ -n "$ORT" ] || return 0
    root=$(cd "$(dirname "$0")/.." && pwd)
    [ -d "$root/build/ort/node_modules/onnxruntime-node" ] && return 0
    if ! command -v npm >/dev/null; then
        echo "install-deps: npm not found; onnx_spec's onnxruntime cross-check will skip" >&2
        return 0
    fi
    mkdir -p "$root/build/ort"
    (cd "$root/build/ort" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.31.1) ||
        echo "install-deps: npm install onnxruntime-node failed; onnx_spec's onnxruntime cross-check will skip" >&2
}

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    ort
    exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO=sudo
echo "install-deps: installing$missing"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
ort
