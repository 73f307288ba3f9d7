#!/usr/bin/env bash
# Resolves a real Apache Kafka broker (core + transitive runtime jars + a log4j2 SLF4J binding)
# from Maven Central into the repo's ignored .cache/, and prints the classpath file's path.
#
#   scripts/kafka-jars.sh            -> .cache/kafka/4.2.1/classpath.txt   (one line, ':'-joined)
#   KAFKA_VERSION=4.1.0 scripts/kafka-jars.sh
#
# Also writes .cache/kafka/<v>/log4j2-tools.properties (WARN to stderr) for command-line tools.
# Idempotent: when classpath.txt exists and every jar it names is present, it only prints the path.
# Needs: java (17+), mvn (3.8+), network access to Maven Central on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
V=${KAFKA_VERSION:-4.2.1}
LOG4J_VERSION=${LOG4J_VERSION:-}
OUT=$ROOT/.cache/kafka/$V
CP=$OUT/classpath.txt

complete() {
  [ -s "$CP" ] || return 1
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
MVN=(mvn -q -B -Dstyle.color=never -f "$ROOT/tools/kafka/pom.xml" -Dmaven.repo.local="$ROOT/.cache/m2" -Dkafka.version="$V")
if [ -n "$LOG4J_VERSION" ]; then MVN+=(-Dlog4j.version="$LOG4J_VERSION"); fi
"${MVN[@]}" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$OUT.tmp/lib" >&2

# The log4j2 SLF4J binding must match core's log4j-core; check rather than trust the pin.
core=$(ls "$OUT.tmp/lib" | sed -n 's/^log4j-core-\(.*\)\.jar$/\1/p')
impl=$(ls "$OUT.tmp/lib" | sed -n 's/^log4j-slf4j-impl-\(.*\)\.jar$/\1/p')
if [ -n "$core" ] && [ "$core" != "$impl" ] && [ -z "$LOG4J_VERSION" ]; then
  echo "kafka-jars.sh: kafka $V uses log4j-core $core; re-resolving log4j-slf4j-impl $core" >&2
  rm -f "$OUT.tmp/lib"/log4j-slf4j-impl-*.jar
  "${MVN[@]}" -Dlog4j.version="$core" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$OUT.tmp/lib" >&2
fi
ls "$OUT.tmp/lib"/kafka_2.13-"$V".jar >/dev/null

cat > "$OUT.tmp/log4j2-tools.properties" <<'PROPS'
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

rm -rf "$OUT/lib"
mkdir -p "$OUT"
mv "$OUT.tmp/lib" "$OUT/lib"
mv "$OUT.tmp/log4j2-tools.properties" "$OUT/log4j2-tools.properties"
rmdir "$OUT.tmp"
(cd "$OUT/lib" && ls *.jar | sort | sed "s|^|$OUT/lib/|" | paste -sd: -) > "$CP.tmp"
mv "$CP.tmp" "$CP"
echo "$CP"
