#include "daemon/engine.h"

#include <utility>

#include "connectors/postgres_admin.h"

namespace denormd {

Engine::Engine(Config config_in, const StoreFactory& stores, PlanOptions options)
    : config(std::move(config_in)),
      plan(config, options),
      applier(plan),
      decoder(config),
      owned_store_(stores(config)),
      store(*owned_store_) {}

Engine::Engine(Config config_in, const std::string& postgres, PlanOptions options)
    : Engine(std::move(config_in), PostgresStores(postgres), options) {}

}  // namespace denormd
