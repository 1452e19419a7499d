// Engine: what every command that works on a store sets up the same way, in
// one place: the validated config, its plan, the batch applier, the input
// decoder, and the store (created by a StoreFactory, not opened yet). The
// engine holds the store's interfaces only (projections/store_admin.h); which
// store it is the factory's choice: PostgreSQL for the commands
// (connectors/postgres_admin.h), the memory store in tests.
//
// Not copyable or movable: the members borrow each other (declaration order
// is construction order).
#ifndef DENORMD_DAEMON_ENGINE_H_
#define DENORMD_DAEMON_ENGINE_H_

#include <memory>
#include <string>

#include "config/config.h"
#include "formats/input_decoder.h"
#include "projections/batch_applier.h"
#include "projections/projection_plan.h"
#include "projections/store_admin.h"

namespace denormd {

struct Engine {
  // The store of `config` that `stores` makes.
  Engine(Config config_in, const StoreFactory& stores, PlanOptions options = PlanOptions());
  // The PostgreSQL store at `postgres`, a libpq connection string ("" =
  // libpq's defaults).
  Engine(Config config_in, const std::string& postgres, PlanOptions options = PlanOptions());
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Config config;
  const ProjectionPlan plan;
  const BatchApplier applier;
  const InputDecoder decoder;  // each topic's format (native for event logs)

 private:
  const std::unique_ptr<StoreAdministration> owned_store_;

 public:
  // The data path takes it as a Store; the commands administer it.
  StoreAdministration& store;
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_ENGINE_H_
