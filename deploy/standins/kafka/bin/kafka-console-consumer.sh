#!/usr/bin/env bash
# kafka-console-consumer.sh: as in the Kafka distribution.
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" org.apache.kafka.tools.consumer.ConsoleConsumer "$@"
