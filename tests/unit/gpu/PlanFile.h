// The test tools that edit a plan.bin (dtf-test-add-gpu-code): read one,
// and write it back sealed (schema/PlanSeal.h), each failure said with the
// tool's name and the path.
#ifndef DTF_TESTS_UNIT_GPU_PLANFILE_H
#define DTF_TESTS_UNIT_GPU_PLANFILE_H

#include "plan.pb.h"
#include "schema/PlanSeal.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace dtf::testtools {

inline bool readPlanFile(const char *tool, const char *path,
                         dtf::plan::Plan *plan) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (in && plan->ParseFromString(bytes.str()))
    return true;
  std::fprintf(stderr, "%s: cannot read a plan from %s\n", tool, path);
  return false;
}

inline bool writeSealedPlanFile(const char *tool, const char *path,
                                const dtf::plan::Plan &plan) {
  std::ofstream out(path, std::ios::binary);
  out << dtf::plan::sealPlan(plan);
  if (out.flush())
    return true;
  std::fprintf(stderr, "%s: cannot write %s\n", tool, path);
  return false;
}

} // namespace dtf::testtools

#endif // DTF_TESTS_UNIT_GPU_PLANFILE_H
