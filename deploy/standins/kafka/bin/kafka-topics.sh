#!/usr/bin/env bash
# kafka-topics.sh: as in the Kafka distribution.
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
