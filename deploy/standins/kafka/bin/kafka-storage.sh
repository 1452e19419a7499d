#!/usr/bin/env bash
# kafka-storage.sh: as in the Kafka distribution.
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
