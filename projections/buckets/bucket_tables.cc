#include "projections/buckets/bucket_tables.h"

#include <utility>

namespace denormd {

namespace {

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

bool GetVarint(const std::string& bytes, size_t* at, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(bytes[(*at)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

bool GetBytes(const std::string& bytes, size_t* at, std::string* out) {
  uint64_t length = 0;
  if (!GetVarint(bytes, at, &length) || length > bytes.size() - *at) return false;
  out->assign(bytes, *at, length);
  *at += length;
  return true;
}

}  // namespace

std::string PackIndexKeys(const std::vector<IndexKey>& keys) {
  std::string out;
  for (const IndexKey& key : keys) {
    PutVarint(key.sort.size(), &out);
    out += key.sort;
    PutVarint(key.id.size(), &out);
    out += key.id;
  }
  return out;
}

bool UnpackIndexKeys(const std::string& bytes, std::vector<IndexKey>* keys) {
  keys->clear();
  for (size_t at = 0; at < bytes.size();) {
    IndexKey key;
    if (!GetBytes(bytes, &at, &key.sort) || !GetBytes(bytes, &at, &key.id)) return false;
    keys->push_back(std::move(key));
  }
  return true;
}

}  // namespace denormd
