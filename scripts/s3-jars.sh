#!/usr/bin/env bash
# Object storage jars from Maven Central into the repo's ignored .cache/, and prints what it resolved.
#
#   scripts/s3-jars.sh hadoop-aws  -> .cache/s3/hadoop-aws-<v>/classpath.txt (one line, ','-joined: the
#                                     form spark.jars and spark-submit --jars take): hadoop-aws at the
#                                     Hadoop version of PySpark's own jars (hadoop-client-api-<v>.jar in
#                                     the .venv's pyspark), with the AWS SDK bundle and the other runtime
#                                     jars its pom names. Spark's s3a:// file system; the auditor adds it
#                                     to every Spark session that reads s3:// / s3a:// manifests
#                                     (auditor/object_store.py, docs/object-storage.md).
#   scripts/s3-jars.sh s3proxy     -> .cache/s3/s3proxy-<v>.jar: a real S3 API server over a local
#                                     directory, for the tests (tests/harness/s3proxy.py).
#   scripts/s3-jars.sh             -> both.
#
#   HADOOP_VERSION=3.4.2 (default: read from PySpark's jars), S3PROXY_VERSION=2.6.0.
# Idempotent: when the files exist it only prints their paths. Needs java and mvn on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
S3PROXY_VERSION=${S3PROXY_VERSION:-2.6.0}
MVN=(mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$ROOT/.cache/m2")
mkdir -p "$ROOT/.cache/s3" "$ROOT/.cache/m2"

# Maven Central over the network: up to 3 tries, later ones forcing a re-check (-U) of a cached failure
mvn_retry() {
  local try
  for try in 1 2 3; do
    if [ "$try" = 1 ]; then "${MVN[@]}" "$@" >&2 && return 0
    else "${MVN[@]}" -U "$@" >&2 && return 0; fi
    echo "s3-jars.sh: Maven failed (try $try of 3)" >&2
    [ "$try" = 3 ] || sleep $((try * 15))
  done
  return 1
}

hadoop_version() {
  if [ -n "${HADOOP_VERSION:-}" ]; then echo "$HADOOP_VERSION"; return; fi
  local jar
  jar=$(ls "$ROOT"/.venv/lib/python3*/site-packages/pyspark/jars/hadoop-client-api-*.jar 2>/dev/null | head -1)
  [ -n "$jar" ] || { echo "s3-jars.sh: no hadoop-client-api-*.jar in .venv's pyspark: run scripts/setup.sh first, or set HADOOP_VERSION" >&2; exit 1; }
  jar=${jar##*/hadoop-client-api-}
  echo "${jar%.jar}"
}

hadoop_aws() {
  local v out cp
  v=$(hadoop_version)
  out=$ROOT/.cache/s3/hadoop-aws-$v
  cp=$out/classpath.txt
  if [ -s "$cp" ]; then
    local ok=1 j
    IFS=, read -r -a jars < "$cp"
    for j in "${jars[@]}"; do [ -f "$j" ] || ok=0; done
    if [ "$ok" = 1 ]; then echo "$cp"; return; fi
  fi
  command -v mvn >/dev/null || { echo "s3-jars.sh: mvn not found on PATH (Maven 3.8+ required)" >&2; exit 1; }
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp/lib"
  mvn_retry -f "$ROOT/tools/s3/pom.xml" -Dhadoop.version="$v" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$out.tmp/lib"
  ls "$out.tmp/lib/hadoop-aws-$v.jar" >/dev/null
  rm -rf "$out"
  mv "$out.tmp" "$out"
  (cd "$out/lib" && ls -1 "$out"/lib/*.jar | paste -sd, -) > "$cp"
  echo "$cp"
}

s3proxy() {
  local jar=$ROOT/.cache/s3/s3proxy-$S3PROXY_VERSION.jar
  if [ ! -s "$jar" ]; then
    command -v mvn >/dev/null || { echo "s3-jars.sh: mvn not found on PATH (Maven 3.8+ required)" >&2; exit 1; }
    mvn_retry dependency:copy -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" \
        -DoutputDirectory="$ROOT/.cache/s3/tmp" -Dmdep.stripVersion=false
    mv "$ROOT/.cache/s3/tmp/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar" "$jar"
    rmdir "$ROOT/.cache/s3/tmp" 2>/dev/null || true
  fi
  echo "$jar"
}

case ${1:-all} in
  hadoop-aws) hadoop_aws ;;
  s3proxy) s3proxy ;;
  all) s3proxy; hadoop_aws ;;
  *) echo "s3-jars.sh: unknown argument '$1' (hadoop-aws, s3proxy or none)" >&2; exit 2 ;;
esac
