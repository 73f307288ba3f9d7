#!/usr/bin/env bash
# Resolves a real Apache Kafka broker (core + transitive runtime jars + a log4j2 SLF4J binding)
# from Maven Central into the repo's ignored .cache/, and prints the classpath file's path.
#
#   scripts/kafka-jars.sh            -> .cache/kafka/4.2.1/classpath.txt   (one line, ':'-joined)
#   KAFKA_VERSION=4.1.0 scripts/kafka-jars.sh
#   KAFKA_VERSION=3.9.1 scripts/kafka-jars.sh   -> a 3.x broker (still answers ListOffsets v0), from
#                                               tools/kafka/pom-3.x.xml: 3.x logs through slf4j onto
#                                               reload4j (log4j 1.x), not log4j2
#
# Also writes .cache/kafka/<v>/log4j2-tools.properties (4.x) or log4j-tools.properties (3.x; log4j
# 1.x syntax) (WARN to stderr) for command-line tools.
# Idempotent: when classpath.txt exists and every jar it names is present, it only prints the path.
# Needs: java (17+), mvn (3.8+), network access to Maven Central on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
V=${KAFKA_VERSION:-4.2.1}
LOG4J_VERSION=${LOG4J_VERSION:-}
OUT=$ROOT/.cache/kafka/$V
CP=$OUT/classpath.txt

# 3.x brokers need another dependency set (a reload4j SLF4J binding instead of log4j2's)
case $V in
  3.*) POM=$ROOT/tools/kafka/pom-3.x.xml; TOOLS_LOG=log4j-tools.properties ;;
  *)   POM=$ROOT/tools/kafka/pom.xml;     TOOLS_LOG=log4j2-tools.properties ;;
esac
POM_STAMP=$OUT/pom.sha256
pom_sha() { sha256sum "$POM" | cut -d' ' -f1; }

complete() {
  [ -s "$CP" ] || return 1
  # a changed pom (a dependency added) means re-resolving; no stamp = resolved before stamps existed
  [ -f "$POM_STAMP" ] || return 1
  [ "$(cat "$POM_STAMP")" = "$(pom_sha)" ] || return 1
  local j
  IFS=: read -r -a jars < "$CP"
  for j in "${jars[@]}"; do [ -f "$j" ] || return 1; done
  return 0
}

if complete; then
  echo "$CP"
  exit 0
fi

command -v java >/dev/null || { echo "kafka-jars.sh: java not found on PATH (Java 17+ required)" >&2; exit 1; }
command -v mvn  >/dev/null || { echo "kafka-jars.sh: mvn not found on PATH (Maven 3.8+ required)" >&2; exit 1; }

rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/lib" "$ROOT/.cache/m2"
MVN=(mvn -q -B -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$ROOT/.cache/m2" -Dkafka.version="$V")
if [ -n "$LOG4J_VERSION" ]; then MVN+=(-Dlog4j.version="$LOG4J_VERSION"); fi
# Maven Central over the network on a fresh machine: up to 3 tries. A failed download is cached
# (*.lastUpdated) and not retried before the update interval, so later tries force it (-U).
mvn_retry() {
  local try
  for try in 1 2 3; do
    if [ "$try" = 1 ]; then "${MVN[@]}" "$@" >&2 && return 0
    else "${MVN[@]}" -U "$@" >&2 && return 0; fi
    echo "kafka-jars.sh: Maven failed (try $try of 3)" >&2
    [ "$try" = 3 ] || sleep $((try * 15))
  done
  return 1
}
mvn_retry dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$OUT.tmp/lib"

# The log4j2 SLF4J binding must match core's log4j-core; check rather than trust the pin.
core=$(ls "$OUT.tmp/lib" | sed -n 's/^log4j-core-\(.*\)\.jar$/\1/p')
impl=$(ls "$OUT.tmp/lib" | sed -n 's/^log4j-slf4j-impl-\(.*\)\.jar$/\1/p')
if [ -n "$core" ] && [ "$core" != "$impl" ] && [ -z "$LOG4J_VERSION" ]; then
  echo "kafka-jars.sh: kafka $V uses log4j-core $core; re-resolving log4j-slf4j-impl $core" >&2
  rm -f "$OUT.tmp/lib"/log4j-slf4j-impl-*.jar
  mvn_retry -Dlog4j.version="$core" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$OUT.tmp/lib"
fi
ls "$OUT.tmp/lib"/kafka_2.13-"$V".jar >/dev/null

if [ "$TOOLS_LOG" = log4j-tools.properties ]; then
cat > "$OUT.tmp/$TOOLS_LOG" <<'PROPS'
# Command-line tools (StorageTool, DumpLogSegments) of Kafka 3.x (reload4j, log4j 1.x syntax):
# only warnings, on stderr.
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
PROPS
else
cat > "$OUT.tmp/$TOOLS_LOG" <<'PROPS'
# Command-line tools (StorageTool, DumpLogSegments): only warnings, on stderr.
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
PROPS
fi

mkdir -p "$OUT"
if [ -d "$OUT/lib" ]; then
  # Re-resolving under a live lib/ (a dependency was added): brokers and tools of other test runs
  # may be using these jars, so add the new jars beside them instead of replacing the directory;
  # the classpath lists exactly the jars this resolution chose.
  cp -n "$OUT.tmp/lib"/*.jar "$OUT/lib/"
  JARS=$(cd "$OUT.tmp/lib" && ls *.jar | sort)
  rm -rf "$OUT.tmp/lib"
else
  mv "$OUT.tmp/lib" "$OUT/lib"
  JARS=$(cd "$OUT/lib" && ls *.jar | sort)
fi
mv "$OUT.tmp/$TOOLS_LOG" "$OUT/$TOOLS_LOG"
rmdir "$OUT.tmp"
echo "$JARS" | sed "s|^|$OUT/lib/|" | paste -sd: - > "$CP.tmp"
mv "$CP.tmp" "$CP"
pom_sha > "$POM_STAMP"
echo "$CP"
