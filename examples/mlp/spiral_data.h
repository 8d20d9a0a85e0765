#pragma once

// Two interleaved spirals in the plane, one per class, with a little
// Gaussian noise: a small data set that no linear model separates. Shared by
// the data tool, the MLP step libraries and their tests, so that training
// files and held-out sets come from the same distribution.

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::examples {

// One example as stored in a record: float32 [x0, x1, label], label 0 or 1.
using SpiralExample = std::array<float, 3>;
inline constexpr size_t kSpiralExampleBytes = sizeof(SpiralExample);

inline constexpr double kSpiralTurns = 1.5;
inline constexpr double kSpiralNoise = 0.04;

// `count` examples with labels 0, 1, 0, 1, ..., the same for the same seed
// on every machine.
inline std::vector<SpiralExample> GenerateSpirals(int64_t count,
                                                  uint64_t seed) {
  constexpr double kPi = 3.14159265358979323846;
  // mt19937_64's output is fixed by the standard and <random>'s
  // distributions are not, so the uniform and normal draws are written out.
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
  };
  std::vector<SpiralExample> examples;
  examples.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % 2);
    const double t = uniform();
    const double angle = t * kSpiralTurns * 2 * kPi + label * kPi;
    // Box-Muller: two independent standard normal draws.
    const double r = std::sqrt(-2 * std::log(1 - uniform()));
    const double theta = 2 * kPi * uniform();
    examples.push_back({static_cast<float>(t * std::cos(angle) +
                                           kSpiralNoise * r * std::cos(theta)),
                        static_cast<float>(t * std::sin(angle) +
                                           kSpiralNoise * r * std::sin(theta)),
                        static_cast<float>(label)});
  }
  return examples;
}

inline std::string EncodeSpiralExample(const SpiralExample& example) {
  return std::string(reinterpret_cast<const char*>(example.data()),
                     kSpiralExampleBytes);
}

}  // namespace cohort::examples
