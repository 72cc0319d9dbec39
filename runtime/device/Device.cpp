// Names of devices, shared by every implementation.
#include "runtime/device/Device.h"

namespace dtf::device {

std::string gpuDeviceName(int index) {
  return strCat("/job:localhost/replica:0/task:0/device:GPU:", index);
}

} // namespace dtf::device
