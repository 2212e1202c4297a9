// Prints the keys of a fixed namespace and token sequence, one hex key per line (root first).
// block_key_test runs it in separate processes to show keys do not depend on the process.
#include <cstdio>
#include <vector>

#include "index/block_key.h"
#include "index/namespace.h"

int main() {
  kvtier::Namespace ns;
  ns.model_id = "llama-3-8b";
  kvtier::BlockKey root = kvtier::NamespaceRoot(ns);
  std::vector<uint32_t> tokens(100);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = i * 7919u + 1;
  std::printf("%s\n", root.ToHex().c_str());
  for (const auto& k : kvtier::TokenBlockKeys(root, tokens, 16))
    std::printf("%s\n", k.ToHex().c_str());
  return 0;
}
