#!/usr/bin/env bash
# Packs .gpu/ for a run on the lent GPU machine (see docs/gpu.md): the shared pack.sh with hicache-core and
# hicache-testkit (a Java 25 runtime and those modules' jars with their runtime dependencies), plus the bench jar,
# which holds the GPU entry point and the cuda suite. The bench module's own dependencies (RocksDB, the AWS SDK)
# are left out: they would not fit the 64 MiB the GPU machine takes, and the GPU run does not use them.
#
# Usage: scripts/pack-gpu.sh        (needs ../shared/gpu/pack.sh beside the checkout)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
pack=${HICACHE_GPU_PACK:-$root/../shared/gpu/pack.sh}
[[ -x $pack ]] || { echo "pack-gpu.sh: $pack not found (set HICACHE_GPU_PACK)" >&2; exit 1; }
mkdir -p .git/info
# pack.sh copies each module's dependencies without building its siblings: put them in the local repository.
mvn -q -B -ntp -DskipTests -pl .,hicache-core,hicache-testkit install
"$pack" hicache-core,hicache-testkit
mvn -q -B -ntp -DskipTests -pl hicache-bench -am package
cp hicache-bench/target/hicache-bench.jar .gpu/lib/
echo "added hicache-bench.jar; .gpu is $(du -sm .gpu | cut -f1) MiB"
