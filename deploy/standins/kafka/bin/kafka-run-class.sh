#!/usr/bin/env bash
# kafka-run-class.sh CLASS [ARGS]: run a class of the Kafka distribution (the
# stand-in's counterpart of Kafka's script of the same name, honouring
# KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS and KAFKA_OPTS).
base="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
heap="${KAFKA_HEAP_OPTS:--Xmx256M}"
perf="${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true}"
log4j="${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$base/config/tools-log4j2.yaml}"
# shellcheck disable=SC2086
exec java $heap $perf $log4j $KAFKA_OPTS -cp "$base/libs/*" "$@"
