#!/usr/bin/env bash
# Build llama.cpp's own tools (llama-speculative-simple, llama-bench, llama-server) from the
# source vendored in the pinned llama-cpp-python sdist, once, into the cache:
#   ${SPECVIZ_CACHE:-~/.cache/specviz}/llama.cpp-tools/<version>/bin
# They are the references a CPU user would pick: the bench's ll-* methods run them, and skip
# themselves (saying so) until this has run. About 5-10 minutes on 2 cores.
set -euo pipefail
version=$(python3.11 -c "import importlib.metadata as m; print(m.version('llama-cpp-python'))")
cache=${SPECVIZ_CACHE:-$HOME/.cache/specviz}
if [ -z "${SPECVIZ_CACHE:-}" ] && [ -d /data ] && [ -w /data ]; then cache=/data/specviz; fi
out="$cache/llama.cpp-tools/$version"
tools=(llama-speculative-simple llama-bench llama-server)
if [ -x "$out/bin/llama-speculative-simple" ] && [ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/llama-server" ]; then
  echo "llama.cpp tools $version already built in $out/bin"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetching the llama-cpp-python $version sdist ..."
python3.11 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
command -v cmake >/dev/null || python3.11 -m pip install -q cmake
start=$(date +%s)
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$work/build" --target "${tools[@]}" -j "$(nproc)" >/dev/null
mkdir -p "$out/bin.partial"
for t in "${tools[@]}"; do cp "$work/build/bin/$t" "$out/bin.partial/"; done
rm -rf "$out/bin" && mv "$out/bin.partial" "$out/bin"
echo "built ${tools[*]} in $(( $(date +%s) - start )) s into $out/bin"
