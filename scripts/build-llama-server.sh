#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` into .cache/llama-server, for the e2e test
# (tests/e2e/test_measure_llama_cpp.py), with nothing but PyPI:
#
#   The llama-cpp-python sdist vendors llama.cpp (vendor/llama.cpp, tools/server included). The
#   version and the sdist's sha256 come from uv.lock, so the server is the same llama.cpp as the
#   locked llama-cpp-python; pip downloads the sdist (its ordinary client), the hash is checked,
#   and cmake builds the one target, static, without the web UI (no npm, no download).
#
# Cached twice: a build is kept in $LLAMA_SERVER_CACHE (default ~/.cache/advisor, which outlives a
# clean clone) under a stamp of what made it (version, sdist hash, build flags, this CPU — the build
# is -march=native), and copied to .cache/llama-server. A matching stamp skips the build.
#
#   scripts/build-llama-server.sh            # prints the binary's path on the last line
#   JOBS=2 LLAMA_SERVER_CACHE=/elsewhere scripts/build-llama-server.sh
#
# Needs cmake (>= 3.18), a C++17 compiler, python3 (>= 3.11, for tomllib); ninja is used when present.
# A pip download prepares the sdist's metadata, which fetches its build backend (scikit-build-core)
# from PyPI as a wheel; nothing else is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/advisor}"
BUILT="$CACHE/llama-server"
OUT=".cache/llama-server"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
PYTHON="${PYTHON:-python3}"
# pip, PyPI's own client: the one beside uv (make's .uv/), else uvx's, else python's.
if [ -z "${PIP:-}" ]; then
  if [ -x .uv/bin/pip ]; then PIP=.uv/bin/pip
  elif command -v uvx >/dev/null 2>&1; then PIP="uvx pip"
  else PIP="$PYTHON -m pip"
  fi
fi

# The locked llama-cpp-python: version and sdist sha256 (uv.lock is TOML).
read -r VERSION SHA256 < <("$PYTHON" - <<'EOF'
import tomllib
with open("uv.lock", "rb") as f:
    lock = tomllib.load(f)
pkg = next(p for p in lock["package"] if p["name"] == "llama-cpp-python")
print(pkg["version"], pkg["sdist"]["hash"].removeprefix("sha256:"))
EOF
)

CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_NATIVE=ON
  -DLLAMA_BUILD_COMMON=ON
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_OPENSSL=OFF
)
# -march=native: a binary built on another CPU may not run here.
CPU="$( (grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo) 2>/dev/null | sha256sum | cut -c1-16)"
WANT="llama-cpp-python==$VERSION sha256=$SHA256 cpu=$CPU flags=${CMAKE_FLAGS[*]}"

stamped() { [ -x "$1" ] && [ -f "$1.stamp" ] && [ "$(cat "$1.stamp")" = "$WANT" ]; }
publish() {
  mkdir -p "$(dirname "$OUT")"
  if [ "$BUILT" != "$OUT" ]; then
    install -m 0755 "$BUILT" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
    cp "$BUILT.stamp" "$OUT.stamp"
  fi
  echo "$OUT"
}

if stamped "$OUT"; then
  echo "llama-server: up to date ($OUT, llama-cpp-python $VERSION)" >&2
  echo "$OUT"
  exit 0
fi
if stamped "$BUILT"; then
  echo "llama-server: cached in $BUILT (llama-cpp-python $VERSION)" >&2
  publish
  exit 0
fi

mkdir -p "$CACHE"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
START=$(date +%s)

echo "llama-server: downloading the llama-cpp-python $VERSION sdist" >&2
$PIP download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
  "llama-cpp-python==$VERSION" -d "$WORK/sdist" >&2
TARBALL="$(ls "$WORK"/sdist/llama_cpp_python-"$VERSION".tar.gz)"
echo "$SHA256  $TARBALL" | sha256sum --check --quiet - >&2 \
  || { echo "llama-server: the sdist's sha256 is not uv.lock's" >&2; exit 1; }

tar -xzf "$TARBALL" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$SRC/tools/server/CMakeLists.txt" ] || { echo "llama-server: no tools/server in $SRC" >&2; exit 1; }

GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)
echo "llama-server: building llama.cpp from llama-cpp-python $VERSION with $JOBS jobs" >&2
cmake -S "$SRC" -B "$WORK/build" "${GENERATOR[@]}" "${CMAKE_FLAGS[@]}" >"$WORK/configure.log" 2>&1 \
  || { tail -40 "$WORK/configure.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 \
  || { tail -60 "$WORK/build.log" >&2; exit 1; }

install -m 0755 "$WORK/build/bin/llama-server" "$BUILT.tmp"
"$BUILT.tmp" --version >&2
mv "$BUILT.tmp" "$BUILT"
echo "$WANT" >"$BUILT.stamp"
echo "llama-server: built in $(($(date +%s) - START)) s ($BUILT)" >&2
publish
