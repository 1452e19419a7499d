// Engine: what every command that works on a store sets up the same way, in
// one place: the validated config, its plan, the batch applier, the input
// decoder, and the PostgreSQL store (created, not yet opened).
//
// Not copyable or movable: the members borrow each other (declaration order
// is construction order).
#ifndef DENORMD_DAEMON_ENGINE_H_
#define DENORMD_DAEMON_ENGINE_H_

#include <string>

#include "config/config.h"
#include "connectors/postgres_store.h"
#include "formats/input_decoder.h"
#include "projections/batch_applier.h"
#include "projections/projection_plan.h"

namespace denormd {

struct Engine {
  // `postgres`: the libpq connection string ("" = libpq's defaults).
  Engine(Config config_in, const std::string& postgres, PlanOptions options = PlanOptions())
      : config(std::move(config_in)),
        plan(config, options),
        applier(plan),
        decoder(config),
        store(config, postgres) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Config config;
  const ProjectionPlan plan;
  const BatchApplier applier;
  const InputDecoder decoder;  // each topic's format (native for event logs)
  PostgresStore store;
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_ENGINE_H_
