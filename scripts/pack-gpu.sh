#!/usr/bin/env bash
# Packs .gpu/ for a run on the lent GPU machine (see docs/gpu.md): a Java 25 runtime, the jars of the modules a run
# names with their runtime dependencies (through the shared pack.sh), and the two jars that hold the GPU entry point
# and the CUDA kits (hicache-bench.jar, hicache-cuda-tests.jar; their own dependencies are not packed). Works on a
# fresh clone with an empty local Maven repository: it builds and installs what the named modules need first.
#
# Usage: scripts/pack-gpu.sh [MODULES]   MODULES: comma-separated, default hicache-cuda,hicache-testkit,storage-file,transfer
#        (what GpuRun needs; the file store and the TCP rank group for --experiment replay). A run that also takes the daemon names e.g.
#        hicache-cuda,hicache-testkit,storage-file,server. RocksDB (storage-rocksdb) and the AWS SDK (storage-s3) do not fit the 64 MiB the GPU machine
#        takes; pack.sh warns when the pack grows past 60 MiB. HICACHE_GPU_PACK_NO_KITS=1 leaves the kits' jars out
#        (for `GpuRun --experiment ... --no-kits`), which the replay needs to fit beside the working tree, and JCuda's
#        PTX compiler and NVRTC natives and tcnative, which a pack with server and transfer needs to fit.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
pack=${HICACHE_GPU_PACK:-$root/../shared/gpu/pack.sh}
[[ -x $pack ]] || { echo "pack-gpu.sh: $pack not found (set HICACHE_GPU_PACK)" >&2; exit 1; }
modules=${1:-hicache-cuda,hicache-testkit,storage-file,transfer}
mkdir -p .git/info
# pack.sh copies each module's dependencies without building their siblings: put those in the local repository.
# hicache-bench is built (not packed) for GpuRun's jar, so everything it depends on is built too.
mvn -q -B -ntp -Dstyle.color=never -DskipTests -pl "$modules,hicache-bench" -am install
# pack.sh's runtime lacks the HTTP server and client that the PD bootstrap server and its client use (GpuRun
# --experiment pd): build it here with them; pack.sh keeps a jre.tgz it finds. Where xz is at hand the runtime is
# linked uncompressed and packed with xz (.gpu/jre.txz, about 21 MiB against 34 as jre.tgz), so that .gpu and the
# working tree fit the device tool's 64 MiB together; the GPU machine has no xz, so .gpu/java unpacks it with
# Python's tarfile. HICACHE_GPU_PACK_XZ=0 keeps jre.tgz.
use_xz=0
if [[ ${HICACHE_GPU_PACK_XZ:-1} == 1 ]] && command -v xz > /dev/null; then
  use_xz=1
fi
has_runtime() {
  if [[ $use_xz == 1 ]]; then
    [[ -f .gpu/jre.txz ]] && xz -dc .gpu/jre.txz | tar xf - -O jre/release 2>/dev/null | grep -q jdk.httpserver
  else
    [[ -f .gpu/jre.tgz ]] && tar xzf .gpu/jre.tgz -O jre/release 2>/dev/null | grep -q jdk.httpserver
  fi
}
if ! has_runtime; then
  # A JDK 25's jlink (older ones refuse --compress=zip-9): JAVA_HOME, java on the PATH, then /usr/lib/jvm, as
  # ./hicache looks (Maven may run on an older JDK and compile with 25 through its toolchains).
  jdk=
  for c in ${JAVA_HOME:+"$JAVA_HOME"} "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/*; do
    if [[ -x $c/bin/jlink ]] && "$c/bin/java" -version 2>&1 | head -1 | grep -qE 'version "25[."]'; then
      jdk=$c
      break
    fi
  done
  [[ -n $jdk ]] || { echo "pack-gpu.sh: no JDK 25 with jlink (looked at JAVA_HOME, java on the PATH, /usr/lib/jvm)" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT # also when jlink or xz fails
  mkdir -p .gpu
  rm -f .gpu/jre.tgz .gpu/jre.txz
  "$jdk/bin/jlink" --add-modules java.base,java.logging,java.management,jdk.management,jdk.unsupported,java.naming,jdk.compiler,jdk.zipfs,jdk.httpserver,java.net.http \
    --strip-debug --no-header-files --no-man-pages --compress=$([[ $use_xz == 1 ]] && echo zip-0 || echo zip-9) \
    --output "$tmp/jre"
  if [[ $use_xz == 1 ]]; then
    tar cf - -C "$tmp" jre | xz -9e > .gpu/jre.txz
  else
    tar czf .gpu/jre.tgz -C "$tmp" jre
  fi
  rm -rf "$tmp"
fi
if [[ $use_xz == 1 ]]; then
  tar czf .gpu/jre.tgz -T /dev/null # an empty stand-in, so that pack.sh links no runtime of its own
fi
"$pack" "$modules"
if [[ $use_xz == 1 ]]; then
  rm -f .gpu/jre.tgz
  # pack.sh's launcher unpacks jre.tgz with tar: unpack jre.txz with Python instead (lzma is in its standard library)
  unpack='[[ -x /tmp/hicache-jre/bin/java ]] || { rm -rf /tmp/hicache-jre.part && python3 -c '"'"'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")'"'"' "$here/jre.txz" /tmp/hicache-jre.part && mv /tmp/hicache-jre.part/jre /tmp/hicache-jre; }'
  UNPACK=$unpack awk 'index($0, "[[ -x /tmp/hicache-jre/bin/java ]]") == 1 { print ENVIRON["UNPACK"]; next } { print }' \
    .gpu/java > .gpu/java.new
  mv .gpu/java.new .gpu/java
  chmod +x .gpu/java
  grep -q 'jre.txz' .gpu/java || { echo "pack-gpu.sh: could not point .gpu/java at jre.txz" >&2; exit 1; }
fi
cp hicache-bench/target/hicache-bench.jar hicache-cuda/target/hicache-cuda-tests.jar .gpu/lib/
# the cuda-ipc transport, and from the test jars its kit and peer process and the transfer kit's patterns (--experiment pd)
cp transfer-cuda/target/hicache-transfer-cuda.jar transfer-cuda/target/hicache-transfer-cuda-tests.jar \
  transfer/target/hicache-transfer-tests.jar .gpu/lib/
# GpuRun's own dependencies, without the rest of the bench's (RocksDB, the AWS SDK): its command line (picocli, and
# the CLI jar whose terminal check the bench's progress lines use) and the JSON it writes (Jackson).
cp hicache-cli/target/hicache-cli.jar .gpu/lib/
mvn -q -B -ntp -Dstyle.color=never -pl hicache-bench dependency:copy-dependencies -DoutputDirectory="$root/.gpu/lib" \
  -DincludeScope=runtime -DincludeGroupIds=info.picocli,com.fasterxml.jackson.core,com.fasterxml.jackson.datatype
if [[ ${HICACHE_GPU_PACK_NO_KITS:-0} == 1 ]]; then
  # For experiments run with --no-kits: the kits' JUnit jars (and jna-platform, which nothing on the replay's path
  # loads) are left out, so that .gpu and the working tree fit the device tool's 64 MiB together.
  rm -f .gpu/lib/junit-*.jar .gpu/lib/opentest4j-*.jar .gpu/lib/apiguardian-*.jar .gpu/lib/jnr-a64asm-*.jar \
    .gpu/lib/jna-platform-*.jar
  echo "HICACHE_GPU_PACK_NO_KITS=1: left out the kits' jars (run GpuRun with --no-kits)"
  # With server and transfer packed, .gpu only fits beside the tree without JCuda's PTX compiler and NVRTC natives (the
  # kernels are loaded as PTX through the driver; the ttft, replay and pd runs of 2026-11-28 ran without them) and
  # without tcnative (no TLS on the GPU machine).
  natives=$(ls .gpu/lib/jcuda-natives-*-linux-x86_64.jar 2>/dev/null || true)
  if [[ -n $natives ]] && command -v zip > /dev/null; then
    for n in $natives; do
      zip -q -d "$n" 'lib/libJNvPTXCompiler-*' 'lib/libJNvrtc-*' 2>/dev/null || true
    done
  fi
  rm -f .gpu/lib/netty-tcnative-boringssl-static-*.jar
fi
echo "added hicache-bench.jar, hicache-cuda-tests.jar, the cuda-ipc jars, the CLI jar, picocli and Jackson; .gpu is $(du -sm .gpu | cut -f1) MiB"
