// The allocator settings the daemon applies at start (common/process.h).
#include "common/process.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace denormd {
namespace {

// Under AddressSanitizer (ctest -L sanitize) malloc is the sanitizer's, which
// has no glibc arenas or thresholds: mallopt refuses, and there is nothing to
// check.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcMalloc = false;
#else
constexpr bool kGlibcMalloc = true;
#endif

// Allocates `bytes`, touches them (so the pair is not optimized away) and
// returns how many blocks glibc had mapped on their own meanwhile, minus
// before.
size_t MappedBlocksWhileHolding(size_t bytes) {
  const size_t before = mallinfo2().hblks;
  char* volatile block = static_cast<char*>(std::malloc(bytes));
  std::memset(block, 1, bytes);
  const size_t during = mallinfo2().hblks;
  std::free(block);
  return during - before;
}

// glibc raises its mmap threshold to the size of a mapped block when that
// block is freed, so after a 4 MiB block comes and goes, a 2 MiB block would
// come from the heap and stay with the process once freed. With the
// threshold fixed at 1 MiB it is mapped, and given back when freed.
TEST(ConfigureAllocator, BlocksOfAMebibyteOrMoreStayMappedAfterALargeFree) {
  if (!kGlibcMalloc) GTEST_SKIP() << "a sanitizer's allocator, not glibc's";
  ASSERT_TRUE(ConfigureAllocator(nullptr));
  ASSERT_EQ(1u, MappedBlocksWhileHolding(4 << 20));
  EXPECT_EQ(1u, MappedBlocksWhileHolding(2 << 20));
  EXPECT_EQ(0u, MappedBlocksWhileHolding(512 << 10));  // under the threshold: the heap
}

TEST(ConfigureAllocator, AnOperatorsMallocTunablesStand) {
  if (!kGlibcMalloc) GTEST_SKIP() << "a sanitizer's allocator, not glibc's";
  EXPECT_FALSE(ConfigureAllocator("glibc.malloc.arena_max=8"));
  EXPECT_FALSE(ConfigureAllocator("glibc.rtld.nns=2:glibc.malloc.trim_threshold=1"));
  // Tunables of other parts of glibc leave the allocator to denormd.
  EXPECT_TRUE(ConfigureAllocator("glibc.rtld.nns=2"));
  EXPECT_TRUE(ConfigureAllocator(""));
}

}  // namespace
}  // namespace denormd
