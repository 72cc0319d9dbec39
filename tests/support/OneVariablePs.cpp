#include "tests/support/OneVariablePs.h"

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
  // The programs dtfc writes for this step (a train_step that is one
  // apply_sgd of the variable `big` by the inputs g and lr): the worker feeds
  // g and lr and pushes them; the ps reads big and updates it.
  auto value = [](plan::Program *prog, int id, std::vector<int64_t> dims) {
    plan::Value *val = prog->add_values();
    val->set_id(id);
    val->mutable_type()->set_dtype(plan::F32);
    for (int64_t d : dims)
      val->mutable_type()->mutable_shape()->add_dims(d);
  };
  auto op = [](plan::Program *prog, const char *name, std::vector<int> in,
               std::vector<int> out) {
    plan::Op *o = prog->add_ops();
    o->set_name(name);
    for (int i : in)
      o->add_inputs(i);
    for (int i : out)
      o->add_outputs(i);
    return o;
  };
  auto transfer = [](google::protobuf::RepeatedPtrField<plan::Transfer> *list,
                     const char *key, int value, const char *to) {
    plan::Transfer *t = list->Add();
    t->set_key(key);
    t->set_value(value);
    t->set_to(to);
    t->set_variable("big");
  };
  plan::Program *t = p.mutable_train_step();
  t->set_name("train_step");
  value(t, 0, {elements});
  value(t, 1, {elements});
  value(t, 2, {});
  (*op(t, "dtf.read_variable", {}, {0})->mutable_attrs())["name"].set_s("big");
  (*op(t, "dtf.input", {}, {1})->mutable_attrs())["name"].set_s("g");
  (*op(t, "dtf.input", {}, {2})->mutable_attrs())["name"].set_s("lr");
  op(t, "dtf.apply_sgd", {0, 1, 2}, {});
  plan::Program *w = p.mutable_worker_step();
  w->set_name("worker_step");
  value(w, 0, {elements});
  value(w, 1, {});
  (*op(w, "dtf.input", {}, {0})->mutable_attrs())["name"].set_s("g");
  (*op(w, "dtf.input", {}, {1})->mutable_attrs())["name"].set_s("lr");
  for (auto [name, id] : {std::pair<const char *, int>{"g", 0}, {"lr", 1}}) {
    plan::Feed *f = w->add_feeds();
    f->set_name(name);
    f->set_value(id);
  }
  transfer(w->mutable_sends(), "big:grad", 0, "ps");
  transfer(w->mutable_sends(), "big:apply_sgd:2", 1, "ps");
  // The ps updates as the train_step does, from what the worker pushed and
  // it feeds under the keys; its ops serve the held tensor `big`.
  plan::Program *ps = p.mutable_ps_update();
  *ps = *t;
  ps->set_name("ps_update");
  ps->mutable_ops()->DeleteSubrange(1, 2); // the inputs g and lr
  for (plan::Op &o : *ps->mutable_ops())
    o.set_held("big");
  transfer(ps->mutable_recvs(), "big:grad", 1, "");
  transfer(ps->mutable_recvs(), "big:apply_sgd:2", 2, "");
  for (auto [key, id] :
       {std::pair<const char *, int>{"big:grad", 1}, {"big:apply_sgd:2", 2}}) {
    plan::Feed *f = ps->add_feeds();
    f->set_name(key);
    f->set_value(id);
  }
  p.mutable_training()->set_seed(1);
  return p;
}

} // namespace dtf::testing
