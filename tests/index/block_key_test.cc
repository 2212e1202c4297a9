#include "index/block_key.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "index/namespace.h"

namespace kvtier {
namespace {

Namespace Llama() {
  Namespace ns;
  ns.model_id = "llama-3-8b";
  return ns;
}

std::vector<uint32_t> Tokens(uint32_t n) {
  std::vector<uint32_t> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = i * 7919u + 1;
  return t;
}

// Golden values. XXH3-128 of the bytes was cross-checked with `xxhsum -H2` (the xxhash package's
// CLI, which prints hi then lo big-endian) on files holding the same bytes (zero, one, root). Any
// change here changes every key stored by every deployment.
TEST(BlockKeyTest, GoldenZeroParentEmptyTokens) {
  // XXH3_128 of 16 zero bytes.
  EXPECT_EQ(ChainTokenBlock(BlockKey{}, {}).ToHex(), "2d8be206ef23ea0562f8e399959a18e5");
}

TEST(BlockKeyTest, GoldenOneBlock) {
  std::vector<uint32_t> t = {1, 2, 3, 4};
  EXPECT_EQ(ChainTokenBlock(BlockKey{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}, t).ToHex(),
            "9444c7e94f6b2d08a33c94c77fe3544c");
}

TEST(BlockKeyTest, GoldenNamespaceRootAndChain) {
  BlockKey root = NamespaceRoot(Llama());
  EXPECT_EQ(root.ToHex(), "dfd71361560655b54402547cf7960e5b");
  auto keys = TokenBlockKeys(root, Tokens(40), 16);
  ASSERT_EQ(keys.size(), 2u);  // the trailing 8 tokens are a partial block: no key
  EXPECT_EQ(keys[0].ToHex(), "fd69d6b44481cbf31c8d72c68156e572");
  EXPECT_EQ(keys[1].ToHex(), "8876dfbdfade0dd28543f1898c89a0bc");
}

TEST(BlockKeyTest, GoldenEngineHash) {
  EXPECT_EQ(ChainEngineHash(BlockKey{}, 0x1122334455667788ull).ToHex(),
            "df2f9a487dc4126e78d4cde5e2c482f0");
}

TEST(BlockKeyTest, BytesAreLittleEndianLoThenHi) {
  BlockKey k{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  EXPECT_EQ(k.ToHex(), "000102030405060708090a0b0c0d0e0f");
}

TEST(BlockKeyTest, KeysChainOverThePrefix) {
  BlockKey root = NamespaceRoot(Llama());
  auto a = Tokens(64);
  auto b = a;
  b[20] += 1;  // differs in block 1
  auto ka = TokenBlockKeys(root, a, 16);
  auto kb = TokenBlockKeys(root, b, 16);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  for (size_t i = 1; i < 4; ++i)
    EXPECT_NE(ka[i], kb[i]) << "block " << i << " must change with its prefix";
  // The same block of tokens after a different prefix is a different key.
  // Block 2 holds the same tokens in a and b; its parents differ.
  EXPECT_NE(ChainTokenBlock(ka[1], absl::MakeSpan(a).subspan(32, 16)),
            ChainTokenBlock(kb[1], absl::MakeSpan(b).subspan(32, 16)));
  EXPECT_EQ(ChainTokenBlock(ka[0], absl::MakeSpan(a).subspan(16, 16)), ka[1]);
}

TEST(BlockKeyTest, EveryNamespaceFieldChangesTheRoot) {
  const BlockKey base = NamespaceRoot(Llama());
  std::vector<Namespace> variants(9, Llama());
  variants[0].model_id = "llama-3-8b-other";
  variants[1].kv_layout = "vllm_paged";
  variants[2].dtype = "fp16";
  variants[3].block_tokens = 32;
  variants[4].tp_rank = 1, variants[4].tp_size = 2;
  variants[5].tp_size = 2;
  variants[6].lora_id = "adapter-1";
  variants[7].cache_salt = "tenant-a";
  variants[8].key_source = KeySource::kEngineHash;
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_NE(NamespaceRoot(variants[i]), base) << "variant " << i;
  }
}

TEST(BlockKeyTest, CanonicalFormIsUnambiguous) {
  Namespace a = Llama(), b = Llama();
  a.lora_id = "x\ncache_salt=1:y";  // a value that imitates a following field
  b.lora_id = "x";
  b.cache_salt = "y";
  EXPECT_NE(a.Canonical(), b.Canonical());
  EXPECT_NE(NamespaceRoot(a), NamespaceRoot(b));
}

TEST(BlockKeyTest, NamespaceValidationNamesTheField) {
  Namespace ns = Llama();
  ns.block_tokens = 24;
  EXPECT_NE(ns.Validate().message().find("namespace.block_tokens"), std::string::npos);
  ns = Llama();
  ns.tp_rank = 2;
  EXPECT_NE(ns.Validate().message().find("namespace.tp_rank"), std::string::npos);
  ns = Llama();
  ns.model_id.clear();
  EXPECT_NE(ns.Validate().message().find("namespace.model_id"), std::string::npos);
  EXPECT_TRUE(Llama().Validate().ok());
}

TEST(BlockKeyTest, TokenBlockKeysDropsThePartialBlock) {
  BlockKey root = NamespaceRoot(Llama());
  EXPECT_TRUE(TokenBlockKeys(root, Tokens(15), 16).empty());
  EXPECT_EQ(TokenBlockKeys(root, Tokens(16), 16).size(), 1u);
  EXPECT_TRUE(TokenBlockKeys(root, Tokens(16), 0).empty());
}

std::string RunKeyDump() {
  std::string out;
  FILE* p = popen(KVTIER_BINARY_DIR "/tests/index/kvtier_key_dump", "r");
  if (p == nullptr) return out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  pclose(p);
  return out;
}

TEST(BlockKeyTest, KeysAreIdenticalAcrossProcesses) {
  std::string expected = NamespaceRoot(Llama()).ToHex() + "\n";
  for (const auto& k : TokenBlockKeys(NamespaceRoot(Llama()), Tokens(100), 16)) {
    expected += k.ToHex() + "\n";
  }
  std::string first = RunKeyDump();
  std::string second = RunKeyDump();
  EXPECT_EQ(first, expected);
  EXPECT_EQ(second, expected);
}

}  // namespace
}  // namespace kvtier
