#pragma once

// The tf.distribute strategies, as the client submits them and step code
// sees them (tf.distribute.get_strategy()). The parameter-server kind places
// variables on the ps tasks.

namespace cohort {

enum class StrategyKind {
  kMultiWorkerMirrored,
  kMirrored,
  kOneDevice,
  kCentralStorage,  // one agent: one copy of the variables, every device
  kParameterServer,
};

// "MultiWorkerMirroredStrategy", as tf.distribute names the class.
inline const char* StrategyName(StrategyKind strategy) {
  switch (strategy) {
    case StrategyKind::kMultiWorkerMirrored:
      return "MultiWorkerMirroredStrategy";
    case StrategyKind::kMirrored:
      return "MirroredStrategy";
    case StrategyKind::kOneDevice:
      return "OneDeviceStrategy";
    case StrategyKind::kCentralStorage:
      return "CentralStorageStrategy";
    case StrategyKind::kParameterServer:
      return "ParameterServerStrategy";
  }
  return "unknown";
}

}  // namespace cohort
