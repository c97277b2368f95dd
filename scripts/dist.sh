#!/usr/bin/env bash
# `./hicache dist`: the launcher runs this after its build, with the JDK 25 it found as $1. Makes, in target/dist/,
# from that build (docs/install.md says what is in them and how to run them):
#
#   hicache-VERSION-linux-x86_64.tar.gz  hicache-VERSION/ with bin/hicache, lib/ (the command line's jars and
#                                        jvm.options), runtime/ (a Java runtime made with jlink) and README
#   hicache-VERSION-oci.tar              an OCI image of the same files under /opt/hicache, with the C library they
#                                        link against, written here without Docker or a registry
#
# Both come out the same for the same build and commit: every file gets the commit's time (or SOURCE_DATE_EPOCH).
set -euo pipefail
jdk=$1
shift
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
out="$root/target/dist"
die() {
  echo "hicache dist: $*" >&2
  exit 1
}
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "Usage: ./hicache dist
Makes, in target/dist/, from this checkout's build: hicache-VERSION-linux-x86_64.tar.gz (bin/hicache, lib/, a Java
runtime of its own) and hicache-VERSION-oci.tar (an OCI image of the same files, for podman load or docker load).
docs/install.md says how to install and run them."
  exit 0
fi
[ $# -eq 0 ] || { echo "hicache dist: takes no arguments (got: $*); see ./hicache dist --help" >&2; exit 2; }
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] \
  || die "makes a linux-x86_64 archive from this machine's JDK and C library, so it runs on Linux x86_64 only"
for tool in tar gzip sha256sum ldd; do
  command -v "$tool" >/dev/null || die "needs $tool"
done
classpath_file="$root/hicache-cli/target/dist/classpath"
[ -f "$classpath_file" ] || die "no $classpath_file: the build did not write it (run ./hicache version to rebuild)"
version=$(sed -n 's/^version=//p' "$root/hicache-cli/target/maven-archiver/pom.properties")
[ -n "$version" ] || die "no version in hicache-cli/target/maven-archiver/pom.properties"
name="hicache-$version"
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$out"
work=$(mktemp -d "$out/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage="$work/$name"
mkdir -p "$stage/bin" "$stage/lib"
t0=$SECONDS
step() { echo "hicache dist: $*" >&2; }

# ---- lib/: hicache-cli's jar and its runtime class path, as Maven resolved it in the build (no bench, no test jars)
mapfile -t jars < <(echo "$root/hicache-cli/target/hicache-cli.jar"; tr ':' '\n' < "$classpath_file" | sed '/^$/d')
for jar in "${jars[@]}"; do
  [ ! -e "$stage/lib/$(basename "$jar")" ] || die "two jars named $(basename "$jar") on the class path"
  cp "$jar" "$stage/lib/"
done
# RocksDB's jar carries its JNI library for 15 platforms (92 MB) and unpacks the one it needs into java.io.tmpdir in
# every JVM. The archive runs on one platform: librocksdbjni-linux64.so (glibc x86_64) goes to lib/native/, where
# java.library.path finds it (bin/hicache and the image say so), and the jar is repacked without any of them; its
# classes and manifest are unchanged.
mkdir "$stage/lib/native"
for jar in "$stage"/lib/rocksdbjni-*.jar; do
  [ -f "$jar" ] || continue
  unpacked="$work/rocksdbjni"
  mkdir "$unpacked"
  (cd "$unpacked" && "$jdk/bin/jar" --extract --file "$jar")
  [ -f "$unpacked/librocksdbjni-linux64.so" ] || die "$(basename "$jar") has no librocksdbjni-linux64.so"
  mv "$unpacked/librocksdbjni-linux64.so" "$stage/lib/native/"
  find "$unpacked" -maxdepth 1 -name 'librocksdbjni-*' -delete
  rm "$jar"
  "$jdk/bin/jar" --create --file "$jar" --date "$created" --manifest "$unpacked/META-INF/MANIFEST.MF" -C "$unpacked" .
  rm -rf "$unpacked"
done
# After lib/native, the JDK's own default library path on Linux: setting java.library.path replaces it, and JNI
# libraries that load system ones by name (JCuda's libcuda) look there.
library_path_rest=":/usr/java/packages/lib:/usr/lib64:/lib64:/lib:/usr/lib"
# The POM's hicache.jvm.flags, without the build's java.library.path (a folder of the build machine): bin/hicache and
# the image's entry point name lib/native where the archive is.
sed -e 's/ *-Djava\.library\.path=[^ ]*//' "$root/hicache-bench/target/launcher/jvm.options" > "$stage/lib/jvm.options"
grep -q -- '--add-opens' "$stage/lib/jvm.options" || die "no JVM flags in hicache-bench/target/launcher/jvm.options"
step "lib/: ${#jars[@]} jars, $(du -sm "$stage/lib" | cut -f1) MiB"

# ---- runtime/: jlink from the JDK's own run-time image (JEP 493: Temurin 25 ships no jmods/, and its jlink links
# from lib/modules). The modules are what jdeps finds the jars use: the jars without a module-info are its roots and
# -R follows every class they reach, module jars included (naming a module jar as a root instead makes jdeps resolve
# all its requires, and Netty's codec-marshalling requires JBoss Marshalling, which is not here).
plain=()
for jar in "$stage"/lib/*.jar; do
  "$jdk/bin/jar" --list --file "$jar" | grep -E '(^|/)module-info\.class$' >/dev/null || plain+=("$jar")
done
lib_path=$(printf '%s:' "$stage"/lib/*.jar)
found=$("$jdk/bin/jdeps" --print-module-deps --ignore-missing-deps --multi-release 25 -q --class-path "${lib_path%:}" \
  -R "${plain[@]}")
# Left out: java.desktop. The jars name it in two places only, JNA's AWT window handles (Native.getComponentID and
# the like) and a Chronicle CPU "cooler" that writes XML through java.beans; neither runs headless, every command ran
# without it (docs/install.md), and it costs 15 MB and libawt_xawt.so, which links against X11 libraries that the image
# would otherwise have to carry.
# Added: jdk.compiler (and java.compiler with it), 13 MB: the host tier's Chronicle Map loads Chronicle's
# CompilerUtils, whose static initialiser needs javax.tools even though hicache-core ships the class it would compile.
# Checked with the README's QuickStart on the archive's jars under --limit-modules: without them
# NoClassDefFoundError javax/tools/JavaFileManager, with them it runs.
modules=$( (tr ',' '\n' <<<"$found" | grep -vx java.desktop; echo jdk.compiler) | sort -u | paste -sd, -)
"$jdk/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages --no-header-files --compress=zip-6 \
  --output "$stage/runtime"
step "runtime/: jlink of $modules: $(du -sm "$stage/runtime" | cut -f1) MiB"

# ---- bin/hicache, README
cp "$root/scripts/dist/hicache" "$stage/bin/hicache"
chmod 755 "$stage/bin/hicache"
# The newest GLIBC_ symbol version each part needs, for the README and the image's labels.
glibc_needed() { cat "$@" | grep -ao 'GLIBC_2\.[0-9.]*' | sort -uV | tail -1 | sed 's/GLIBC_//'; }
mapfile -t runtime_elfs < <(find "$stage/runtime" -type f \( -name '*.so' -o -path '*/bin/*' \))
natives="$work/natives" # the JNI libraries in the jars that can load on Linux x86_64, to see what they link against
mkdir "$natives"
for jar in "$stage"/lib/*.jar; do
  # .so entries for Linux x86_64 by their path (jffi's jni/x86_64-Linux/, JNA's linux-x86-64/, RocksDB's linux64),
  # or any .so in a jar made for it (Netty's epoll, JCuda's natives: *-linux-x86_64.jar)
  mapfile -t entries < <("$jdk/bin/jar" --list --file "$jar" | grep -E '\.so$' \
    | grep -viE 'musl|aarch64|arm|ppc|s390|riscv|loongarch|mips|sparc|i386|x86/|linux32|bsd|sunos|darwin|aix' \
    | { if [[ $(basename "$jar") == *linux-x86_64* ]]; then cat; else grep -iE 'linux.?(x86.?64|amd64|64)|x86.?64.?linux'; fi; })
  if [ ${#entries[@]} -gt 0 ]; then
    mkdir "$natives/$(basename "$jar")"
    (cd "$natives/$(basename "$jar")" && "$jdk/bin/jar" --extract --file "$jar" "${entries[@]}")
  fi
done
cp "$stage"/lib/native/*.so "$natives/"
mapfile -t native_elfs < <(find "$natives" -type f -name '*.so')
glibc_runtime=$(glibc_needed "${runtime_elfs[@]}")
glibc_jars=$(glibc_needed "${native_elfs[@]}")
jdk_name="$(sed -n 's/^IMPLEMENTOR="\(.*\)"/\1/p' "$jdk/release") $(sed -n 's/^JAVA_RUNTIME_VERSION="\(.*\)"/\1/p' "$jdk/release")"
sed -e "s/@VERSION@/$version/g" -e "s/@JDK@/$jdk_name/g" \
  -e "s|@GLIBC@|$glibc_runtime or newer, $glibc_jars for all the JNI libraries in lib/|g" \
  "$root/scripts/dist/README" > "$stage/README"

# ---- the archive: one top folder, owners and times that do not depend on who built it when
tarball="$out/$name-linux-x86_64.tar.gz"
reproducible=(--sort=name --format=gnu --numeric-owner --mtime="@$epoch")
as_root=(--owner=0 --group=0 --mode=go-w)
tar "${reproducible[@]}" "${as_root[@]}" -C "$work" -cf - "$name" | gzip -n -6 > "$tarball.part"
mv "$tarball.part" "$tarball"
t_archive=$((SECONDS - t0))
step "$(basename "$tarball"): $(du -m "$tarball" | cut -f1) MiB in ${t_archive} s"

# ---- the OCI image, written here rather than with Jib: Jib builds images of a JVM application on a base image
# with a Java runtime in it, and would add a second Maven run and its plugin's dependencies to lay out files it does
# not manage well here (it resets file modes unless each executable is listed, and does not keep symlinks). The image
# is three tar layers over an empty base ("scratch"): the C library, the runtime, HiCache. The tarball is an OCI
# image layout (index.json, blobs/sha256/) that is also a docker-archive (manifest.json), as `docker save` writes
# since Docker 25: `podman load` and `docker load` read it.
t1=$SECONDS
layers="$work/layers"
mkdir -p "$layers/system/lib64" "$layers/system/lib/x86_64-linux-gnu" "$layers/system/etc" "$layers/system/tmp" \
  "$layers/system/var/lib/hicache" "$layers/runtime/opt/hicache" "$layers/app/opt/hicache"
chmod 1777 "$layers/system/tmp" # the JNI libraries unpack into java.io.tmpdir
# What the runtime and the JNI libraries link against, as ldd resolves it on this machine: copied (not linked) under
# their sonames; the loader goes where the executables' PT_INTERP names it. libcuda and NVIDIA's other libraries are
# the driver's: the NVIDIA container toolkit mounts them into a GPU container, so they are not copied.
missing=()
while read -r soname arrow path _; do
  case "$soname" in
    linux-vdso.so.*) ;;
    /*/ld-linux-x86-64.so.2) cp -L "$soname" "$layers/system$soname" ;;
    *)
      if [ "$arrow" = "=>" ] && [ "$path" = not ]; then
        missing+=("$soname")
      elif [ "$arrow" = "=>" ] && [[ $path != "$stage"/* ]]; then
        cp -L "$path" "$layers/system/lib/x86_64-linux-gnu/$soname"
      fi
      ;;
  esac
done < <(LD_LIBRARY_PATH="$stage/runtime/lib:$stage/runtime/lib/server" ldd "${runtime_elfs[@]}" "${native_elfs[@]}" \
  2>/dev/null | grep -v ':$' | sed 's/ (0x[0-9a-f]*)$//' | sort -u)
[ -f "$layers/system/lib64/ld-linux-x86-64.so.2" ] && [ -f "$layers/system/lib/x86_64-linux-gnu/libc.so.6" ] \
  || die "ldd named no loader or no libc.so.6 for the runtime"
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | grep .)
for soname in "${missing[@]}"; do
  case "$soname" in
    libjvm.so | libjava.so | libnet.so | libnio.so | libjli.so) die "ldd could not find the runtime's own $soname" ;;
    libcuda.so.* | libnvrtc.so.* | libnvJitLink.so.* | libnvptxcompiler*) ;;
    *) step "note: $soname, which a JNI library in lib/ links against, is not on this machine and not in the image" ;;
  esac
done
glibc=$(ldd --version | sed -n '1s/.* //p')
printf 'root:x:0:0:root:/root:/sbin/nologin\nhicache:x:65532:65532:HiCache:/var/lib/hicache:/sbin/nologin\n' \
  > "$layers/system/etc/passwd"
printf 'root:x:0:\nhicache:x:65532:\n' > "$layers/system/etc/group"
cp -al "$stage/runtime" "$layers/runtime/opt/hicache/runtime"
cp -al "$stage/bin" "$stage/lib" "$stage/README" "$layers/app/opt/hicache/"

image="$work/image"
mkdir -p "$image/blobs/sha256"
# blob FILE: moves FILE into the blobs under its digest; prints the digest's hex
blob() {
  local hex
  hex=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$image/blobs/sha256/$hex"
  echo "$hex"
}
layer_digests=()
diff_ids=()
for layer in system runtime app; do
  if [ "$layer" = system ]; then
    # Everything belongs to root and is not writable by others, but for /tmp (1777) and /var/lib/hicache, the
    # working directory, which belongs to the image's user.
    tar "${reproducible[@]}" "${as_root[@]}" -C "$layers/system" --exclude=var/lib/hicache -cf "$work/layer.tar" \
      etc lib lib64 var
    tar "${reproducible[@]}" --owner=0 --group=0 -C "$layers/system" -rf "$work/layer.tar" tmp
    tar "${reproducible[@]}" --owner=65532 --group=65532 --mode=go-w -C "$layers/system" -rf "$work/layer.tar" \
      var/lib/hicache
  else
    tar "${reproducible[@]}" "${as_root[@]}" -C "$layers/$layer" -cf "$work/layer.tar" opt
  fi
  diff_ids+=("$(sha256sum "$work/layer.tar" | cut -d' ' -f1)")
  gzip -n -6 "$work/layer.tar"
  layer_digests+=("$(blob "$work/layer.tar.gz")")
done

# The entry point is what bin/hicache runs, spelled out: the image has no shell to run that script with.
# JDK_JAVA_OPTIONS (read by the java launcher itself) takes the place of HICACHE_JAVA_OPTS.
read -r -a flags < "$stage/lib/jvm.options" || [ ${#flags[@]} -gt 0 ]
entrypoint=(/opt/hicache/runtime/bin/java "${flags[@]}" "-Djava.library.path=/opt/hicache/lib/native$library_path_rest"
  -cp '/opt/hicache/lib/*' io.hicache.cli.HiCacheCli)
json_strings() { # the arguments as a JSON array; they are checked to need no escaping
  local s out="" plain='^[][A-Za-z0-9 =/._:+,@*()-]*$'
  for s in "$@"; do
    [[ $s =~ $plain ]] || die "cannot write '$s' into the image's JSON"
    out+="${out:+,}\"$s\""
  done
  echo "[$out]"
}
layer_list() { local d out=""; for d in "$@"; do out+="${out:+,}\"sha256:$d\""; done; echo "[$out]"; }
history='{"created":"'$created'","created_by":"hicache dist: glibc '$glibc' from the build machine"},'
history+='{"created":"'$created'","created_by":"hicache dist: jlink '$jdk_name'"},'
history+='{"created":"'$created'","created_by":"hicache dist: bin, lib (HiCache '$version')"}'
cat > "$work/config.json" <<JSON
{"created":"$created","architecture":"amd64","os":"linux","config":{"User":"65532:65532","Env":$(json_strings "PATH=/opt/hicache/runtime/bin" "LANG=C.UTF-8"),"Entrypoint":$(json_strings "${entrypoint[@]}"),"Cmd":["serve"],"WorkingDir":"/var/lib/hicache","ExposedPorts":{"7370/tcp":{},"9464/tcp":{}},"Labels":{"org.opencontainers.image.title":"HiCache","org.opencontainers.image.version":"$version","io.hicache.glibc":"$glibc","io.hicache.java":"$jdk_name"}},"rootfs":{"type":"layers","diff_ids":$(layer_list "${diff_ids[@]}")},"history":[$history]}
JSON
config_size=$(stat -c %s "$work/config.json")
config_digest=$(blob "$work/config.json")
layer_entries=""
for d in "${layer_digests[@]}"; do
  layer_entries+="${layer_entries:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$d\",\"size\":$(stat -c %s "$image/blobs/sha256/$d")}"
done
cat > "$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config_digest","size":$config_size},"layers":[$layer_entries]}
JSON
manifest_size=$(stat -c %s "$work/manifest.json")
manifest_digest=$(blob "$work/manifest.json")
# index.json names the image for podman (org.opencontainers.image.ref.name) and for Docker's containerd store
# (io.containerd.image.name); manifest.json is the docker-archive view of the same blobs, for Docker's classic store.
cat > "$image/index.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$manifest_digest","size":$manifest_size,"annotations":{"io.containerd.image.name":"docker.io/library/hicache:$version","org.opencontainers.image.ref.name":"$version"}}]}
JSON
docker_layers=""
for d in "${layer_digests[@]}"; do docker_layers+="${docker_layers:+,}\"blobs/sha256/$d\""; done
cat > "$image/manifest.json" <<JSON
[{"Config":"blobs/sha256/$config_digest","RepoTags":["hicache:$version"],"Layers":[$docker_layers]}]
JSON
echo '{"imageLayoutVersion":"1.0.0"}' > "$image/oci-layout"
oci="$out/$name-oci.tar"
tar "${reproducible[@]}" "${as_root[@]}" -C "$image" -cf "$oci.part" oci-layout index.json manifest.json blobs
mv "$oci.part" "$oci"
step "$(basename "$oci"): $(du -m "$oci" | cut -f1) MiB in $((SECONDS - t1)) s (manifest sha256:$manifest_digest)"
echo "hicache dist: target/dist/$(basename "$tarball") ($(du -m "$tarball" | cut -f1) MiB), target/dist/$(basename "$oci") ($(du -m "$oci" | cut -f1) MiB), $((SECONDS - t0)) s"
