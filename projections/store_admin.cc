#include "projections/store_admin.h"

#include "common/text.h"

namespace denormd {

Status StoreAdministration::ClearStaleApply(bool* cleared, uint64_t* journal_rows) {
  if (cleared != nullptr) *cleared = false;
  StoredModel model;
  DENORMD_RETURN_IF_ERROR(ReadModel(&model));
  if (model.applying.empty()) return Status::Ok();
  std::unique_ptr<AdministrationLock> lock;
  Status locked = LockAdministration("prune", &lock);
  if (locked.IsBusy()) return Status::Ok();  // the apply is running
  DENORMD_RETURN_IF_ERROR(locked);
  // AbandonApply reads the mark again, alone among the writers: an apply
  // that finished meanwhile removed it.
  StoredModel before;
  DENORMD_RETURN_IF_ERROR(ReadModel(&before));
  uint64_t removed = 0;
  DENORMD_RETURN_IF_ERROR(AbandonApply(&removed));
  if (cleared != nullptr) *cleared = !before.applying.empty();
  if (journal_rows != nullptr) *journal_rows = removed;
  return lock->Check();
}

Status StaleModelError(const Config& config, const StoredModel& stored) {
  const std::string file_fingerprint = ModelFingerprint(config);
  return Status::StaleConfig(
      "schema " + config.store.schema + " runs other projections (epoch " +
      std::to_string(stored.epoch) + ", fingerprint " + stored.fingerprint + ") than " +
      config.path + " (fingerprint " + file_fingerprint + "); `" + CommandName() + " plan -c " +
      config.path + "` shows the difference and `" + CommandName() + " apply -c " + config.path +
      "` makes the file's projections current");
}

Status StaleIndexError(const Config& config) {
  return Status::InvalidInput(
      "the reference index of schema " + config.store.schema +
      " was built for other projections (their relations changed in the config); "
      "run `" + CommandName() + " rebuild -c " + config.path + "` once to rebuild it");
}

Status ModelMovedError(const Config& config, uint64_t epoch) {
  return Status::StaleConfig("schema " + config.store.schema + "'s epoch is no longer " +
                             std::to_string(epoch) +
                             " (another command changed its model meanwhile): the model of " +
                             config.path + " was not recorded");
}

Status AdministrationBusy(const Config& config, const std::string& command) {
  return Status::Busy("another `denormd apply`, `rebuild` or `plan` is running on schema " +
                      config.store.schema + "; `denormd " + command +
                      "` waits for nothing: run it again when that one has finished");
}

}  // namespace denormd
