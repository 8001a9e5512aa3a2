// Digests and compile keys: the names every blob and cache entry is stored under.
#include <string>

#include "cache/compile_key.h"
#include "cache/digest.h"
#include "gtest/gtest.h"

namespace kiln::cache {
namespace {

// FIPS 180-2 test vectors.
TEST(DigestTest, MatchesKnownSha256Vectors) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Digest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(DigestTest, IncrementalHashEqualsOneShot) {
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131);
  Sha256Hasher hasher;
  for (size_t offset = 0; offset < data.size(); offset += 1000) {
    hasher.Update(std::string_view(data).substr(offset, 1000));
  }
  EXPECT_EQ(hasher.FinishDigest(), Sha256Digest(data));
}

TEST(DigestTest, ValidatesDigestSpelling) {
  EXPECT_TRUE(IsValidDigest(Sha256Digest("x")));
  EXPECT_FALSE(IsValidDigest(""));
  EXPECT_FALSE(IsValidDigest(Sha256Hex("x")));                    // no prefix
  EXPECT_FALSE(IsValidDigest("sha256:" + std::string(63, 'a')));  // too short
  EXPECT_FALSE(IsValidDigest("sha256:" + std::string(65, 'a')));  // too long
  EXPECT_FALSE(IsValidDigest("sha256:" + std::string(64, 'A')));  // uppercase
  EXPECT_FALSE(IsValidDigest("sha256:" + std::string(64, 'g')));  // not hex
  EXPECT_FALSE(IsValidDigest("md5:" + std::string(64, 'a')));
}

TEST(CompileKeyTest, HashesTheCanonicalText) {
  EXPECT_EQ(CompileKeyText("sha256:m", "preset=x", "dim_bounds=", "kiln-0.1.0"),
            "model=sha256:m\ntarget=preset=x\noptions=dim_bounds=\ncompiler=kiln-0.1.0");
  EXPECT_EQ(
      CompileKey("sha256:m", "preset=x", "dim_bounds=", "kiln-0.1.0"),
      Sha256Digest("model=sha256:m\ntarget=preset=x\noptions=dim_bounds=\ncompiler=kiln-0.1.0"));
}

TEST(CompileKeyTest, EveryFieldChangesTheKey) {
  const std::string base = CompileKey("m", "t", "o", "c");
  EXPECT_TRUE(IsValidDigest(base));
  EXPECT_NE(base, CompileKey("m2", "t", "o", "c"));
  EXPECT_NE(base, CompileKey("m", "t2", "o", "c"));
  EXPECT_NE(base, CompileKey("m", "t", "o2", "c"));
  EXPECT_NE(base, CompileKey("m", "t", "o", "c2"));
  EXPECT_EQ(base, CompileKey("m", "t", "o", "c"));
}

}  // namespace
}  // namespace kiln::cache
