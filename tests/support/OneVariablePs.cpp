#include "tests/support/OneVariablePs.h"

#include "compiler/partition/Partition.h"
#include "runtime/plan/PlanReader.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace dtf::testing {

int freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

plan::Plan oneVariableSgdPlan(int64_t elements, const char *model) {
  plan::Plan p;
  p.set_format_version(plan::kPlanFormatVersion);
  p.set_model(model);
  plan::Variable *v = p.add_variables();
  v->set_name("big");
  v->mutable_type()->set_dtype(plan::F32);
  v->mutable_type()->mutable_shape()->add_dims(elements);
  v->mutable_initializer()->set_kind("zeros");
  v->set_trainable(true);
  v->set_partitions(1);
  v->set_role("model");
  plan::Program *t = p.mutable_train_step();
  auto value = [&](int id, std::vector<int64_t> dims) {
    plan::Value *val = t->add_values();
    val->set_id(id);
    val->mutable_type()->set_dtype(plan::F32);
    for (int64_t d : dims)
      val->mutable_type()->mutable_shape()->add_dims(d);
  };
  value(0, {elements});
  value(1, {elements});
  value(2, {});
  auto op = [&](const char *name, std::vector<int> in, std::vector<int> out) {
    plan::Op *o = t->add_ops();
    o->set_name(name);
    for (int i : in)
      o->add_inputs(i);
    for (int i : out)
      o->add_outputs(i);
    return o;
  };
  (*op("dtf.read_variable", {}, {0})->mutable_attrs())["name"].set_s("big");
  (*op("dtf.input", {}, {1})->mutable_attrs())["name"].set_s("g");
  (*op("dtf.input", {}, {2})->mutable_attrs())["name"].set_s("lr");
  op("dtf.apply_sgd", {0, 1, 2}, {});
  p.mutable_training()->set_seed(1);
  (void)plan::cutPlan(&p);
  return p;
}

} // namespace dtf::testing
