// Reading and printing the value types of kvtierd's config (config_schema.cc uses these). Readers
// take a TOML node and return the value or InvalidArgument saying what is wrong, without key or
// place (the loader adds those); printers return TOML literals that the readers accept back.
//
// Sizes: an integer number of bytes, or a string of a number and a binary unit: B, KiB, MiB, GiB,
// TiB ("8GiB", "1.5 GiB", "4096"). Decimal units (KB, MB, GB, TB) and bare K/M/G/T are refused:
// "8G" could mean 8e9 or 8 * 2^30, and a T1 7% smaller than intended is a silent capacity bug.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::config {

absl::StatusOr<uint64_t> ReadSize(const toml::node& value);
absl::StatusOr<uint64_t> ParseSizeText(std::string_view text);
absl::StatusOr<uint64_t> ReadUint(const toml::node& value, uint64_t max);
absl::StatusOr<double> ReadDouble(const toml::node& value);
absl::StatusOr<bool> ReadBool(const toml::node& value);
absl::StatusOr<std::string> ReadString(const toml::node& value);
// One of `choices`.
absl::StatusOr<std::string> ReadChoice(const toml::node& value,
                                       const std::vector<std::string>& choices);
absl::StatusOr<std::vector<std::string>> ReadStringList(const toml::node& value);
// An array of names or numeric ids (strings or integers); integers come back as decimal text.
absl::StatusOr<std::vector<std::string>> ReadIdList(const toml::node& value);
// A file mode: an octal string ("0660") or an integer (TOML 0o660); permission bits only.
absl::StatusOr<uint32_t> ReadMode(const toml::node& value);

std::string Quote(std::string_view text);  // a TOML basic string
std::string FormatSize(uint64_t bytes);    // "\"1GiB\"" when whole in a unit, else 12345
std::string FormatDouble(double value);    // always with a '.' or exponent, so it stays a float
std::string FormatBool(bool value);
std::string FormatList(const std::vector<std::string>& items);  // ["a", "b"]
std::string FormatMode(uint32_t mode);                          // "\"0660\""

// "lru, fifo, sieve" -> {"lru", "fifo", "sieve"}.
std::vector<std::string> SplitNames(std::string_view names);

}  // namespace kvtier::config
