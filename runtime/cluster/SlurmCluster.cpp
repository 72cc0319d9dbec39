// SlurmCluster: a job step's host list, task layout and ports as a cluster.
#include "runtime/cluster/SlurmCluster.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace dtf::cluster {
namespace {

// More hosts or tasks than any real step has: a typo such as n[1-100000000]
// is an error, not an allocation of gigabytes.
constexpr long long kMaxItems = 1 << 20;

bool allDigits(const std::string &s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// Splits on commas outside brackets.
std::vector<std::string> splitTopLevel(const std::string &text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[')
      ++depth;
    else if (c == ']')
      --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

// "1-3,07" inside brackets -> "1" "2" "3" "07" (the width of the lower bound
// pads every number of its range, as Slurm does).
Status expandRanges(const std::string &ranges, const std::string &where,
                    std::vector<std::string> *out) {
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string::npos)
      comma = ranges.size();
    const std::string item = ranges.substr(start, comma - start);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi =
        dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!allDigits(lo) || !allDigits(hi))
      return errorStatus(where, ": '", item,
                         "' is not a number or a range like 1-4");
    const long long a = std::stoll(lo), b = std::stoll(hi);
    if (b < a)
      return errorStatus(where, ": range '", item, "' ends before it starts");
    if (b - a + 1 + (long long)out->size() > kMaxItems)
      return errorStatus(where, ": range '", item, "' is too long");
    for (long long v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size())
        digits.insert(0, lo.size() - digits.size(), '0');
      out->push_back(digits);
    }
    start = comma + 1;
  }
  return Status::ok();
}

Status expandHost(const std::string &pattern, const std::string &list,
                  std::vector<std::string> *out) {
  const std::string where = "host list '" + list + "'";
  std::vector<std::string> names{""};
  size_t i = 0;
  while (i < pattern.size()) {
    const size_t open = pattern.find('[', i);
    const size_t close = pattern.find(']', i);
    if (close != std::string::npos &&
        (open == std::string::npos || close < open))
      return errorStatus(where, ": ']' without '[' in '", pattern, "'");
    const std::string literal = pattern.substr(
        i, open == std::string::npos ? std::string::npos : open - i);
    for (std::string &n : names)
      n += literal;
    if (open == std::string::npos)
      break;
    const size_t end = pattern.find(']', open);
    if (end == std::string::npos)
      return errorStatus(where, ": '[' without ']' in '", pattern, "'");
    std::vector<std::string> values;
    DTF_RETURN_IF_ERROR(
        expandRanges(pattern.substr(open + 1, end - open - 1), where, &values));
    if ((long long)names.size() * (long long)values.size() > kMaxItems)
      return errorStatus(where, ": expands to too many hosts");
    std::vector<std::string> product;
    for (const std::string &n : names)
      for (const std::string &v : values)
        product.push_back(n + v);
    names = std::move(product);
    i = end + 1;
  }
  for (std::string &n : names) {
    if (n.empty())
      return errorStatus(where, ": has an empty host name");
    out->push_back(std::move(n));
  }
  return Status::ok();
}

// The step's value of a variable, else the job's.
const char *stepOrJob(const EnvironmentReader &env, const char *step,
                      const char *job, std::string *name) {
  if (const char *v = env(step)) {
    *name = step;
    return v;
  }
  *name = job;
  return env(job);
}

Status readInt(const EnvironmentReader &env, const char *name, int *out) {
  const char *v = env(name);
  if (!v)
    return errorStatus(name, " is not set: --cluster slurm runs as a task of a "
                             "Slurm job step; start every task with srun");
  if (!allDigits(v))
    return errorStatus(name, " is '", v, "', not a task number");
  *out = std::stoi(v);
  return Status::ok();
}

} // namespace

Status expandHostList(const std::string &list, std::vector<std::string> *out) {
  out->clear();
  if (list.find_first_not_of(" \t") == std::string::npos)
    return errorStatus("the host list is empty");
  int depth = 0;
  for (char c : list) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0 || depth > 1)
      return errorStatus("host list '", list, "': unbalanced brackets");
  }
  if (depth != 0)
    return errorStatus("host list '", list, "': '[' without ']'");
  for (const std::string &pattern : splitTopLevel(list))
    DTF_RETURN_IF_ERROR(expandHost(pattern, list, out));
  return Status::ok();
}

Status expandTasksPerNode(const std::string &text, std::vector<int> *out) {
  out->clear();
  const std::string where = "tasks per node '" + text + "'";
  for (const std::string &item : splitTopLevel(text)) {
    std::string count = item, repeat = "1";
    const size_t paren = item.find('(');
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 ||
          item.back() != ')')
        return errorStatus(where, ": '", item,
                           "' is not N or N(xK), e.g. 3(x2)");
      count = item.substr(0, paren);
      repeat = item.substr(paren + 2, item.size() - paren - 3);
    }
    if (!allDigits(count) || !allDigits(repeat))
      return errorStatus(where, ": '", item, "' is not N or N(xK), e.g. 3(x2)");
    const int n = std::stoi(count), k = std::stoi(repeat);
    if ((long long)out->size() + k > kMaxItems)
      return errorStatus(where, ": too many nodes");
    out->insert(out->end(), size_t(k), n);
  }
  return Status::ok();
}

Status expandPortList(const std::string &text, std::vector<int> *out) {
  out->clear();
  std::vector<std::string> items;
  DTF_RETURN_IF_ERROR(expandRanges(text, "port list '" + text + "'", &items));
  for (const std::string &p : items) {
    const int port = std::stoi(p);
    if (port < 1 || port > 65535)
      return errorStatus("port list '", text, "': ", port,
                         " is not a port (1 to 65535)");
    out->push_back(port);
  }
  return Status::ok();
}

Status SlurmJobs::parse(const std::string &text, SlurmJobs *out) {
  SlurmJobs jobs;
  jobs.counts.clear();
  for (const std::string &item : splitTopLevel(text)) {
    const size_t eq = item.find('=');
    const std::string job = item.substr(0, eq);
    const std::string n = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (!allDigits(n))
      return errorStatus("--slurm-jobs: '", item,
                         "' is not JOB=COUNT, e.g. ps=2,chief=1");
    if (job != kPsJob && job != kChiefJob && job != kEvaluatorJob &&
        job != kWorkerJob)
      return errorStatus("--slurm-jobs: unknown job '", job,
                         "'; the jobs are ps, chief, evaluator and worker "
                         "(which takes the ranks left over)");
    for (const auto &[j, count] : jobs.counts)
      if (j == job)
        return errorStatus("--slurm-jobs: job '", job, "' is given twice");
    jobs.counts.emplace_back(job, std::stoi(n));
  }
  *out = std::move(jobs);
  return Status::ok();
}

Status clusterFromSlurm(const EnvironmentReader &env,
                        const SlurmOptions &options, ClusterSpec *out,
                        TaskId *task) {
  int rank = 0;
  DTF_RETURN_IF_ERROR(readInt(env, "SLURM_PROCID", &rank));
  std::string listName, perNodeName, countName;
  const char *list =
      stepOrJob(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", &listName);
  const char *perNode = stepOrJob(env, "SLURM_STEP_TASKS_PER_NODE",
                                  "SLURM_TASKS_PER_NODE", &perNodeName);
  const char *count =
      stepOrJob(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", &countName);
  if (!list || !perNode)
    return errorStatus(
        "SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE are not set: "
        "--cluster slurm runs as a task of a Slurm job step; start every "
        "task with srun");
  std::vector<std::string> nodes;
  Status s = expandHostList(list, &nodes);
  if (!s.isOk())
    return errorStatus(listName, ": ", s.message());
  std::vector<int> slots;
  s = expandTasksPerNode(perNode, &slots);
  if (!s.isOk())
    return errorStatus(perNodeName, ": ", s.message());
  if (slots.size() != nodes.size())
    return errorStatus(perNodeName, " '", perNode, "' gives ", slots.size(),
                       " node(s) but ", listName, " '", list, "' has ",
                       nodes.size());
  int total = 0;
  for (int n : slots)
    total += n;
  if (count && (!allDigits(count) || std::stoi(count) != total))
    return errorStatus(countName, " is '", count, "' but ", perNodeName, " '",
                       perNode, "' adds up to ", total, " tasks");
  if (rank >= total)
    return errorStatus("SLURM_PROCID ", rank, " is out of range: the step has ",
                       total, " tasks");

  // Slurm's layout of ranks over nodes. -m block fills each node in list
  // order; -m cyclic deals one rank to each node with a slot left, in turn.
  std::string distribution =
      env("SLURM_DISTRIBUTION") ? env("SLURM_DISTRIBUTION") : "block";
  distribution = distribution.substr(0, distribution.find_first_of(":,"));
  if (distribution != "block" && distribution != "cyclic")
    return errorStatus(
        "SLURM_DISTRIBUTION is '", env("SLURM_DISTRIBUTION"),
        "': --cluster slurm knows where srun puts each task only for -m "
        "block (the default) and -m cyclic; run srun with one of those");
  std::vector<std::pair<int, int>> placed; // rank -> (node, slot)
  std::vector<int> used(nodes.size(), 0);
  if (distribution == "block") {
    for (size_t n = 0; n < nodes.size(); ++n)
      for (int k = 0; k < slots[n]; ++k)
        placed.emplace_back(int(n), k);
  } else {
    while (int(placed.size()) < total)
      for (size_t n = 0; n < nodes.size(); ++n)
        if (used[n] < slots[n])
          placed.emplace_back(int(n), used[n]++);
  }

  // This task must be where the layout says; a mismatch means srun laid the
  // step out some other way, and every task's idea of the cluster would
  // differ.
  const auto [myNode, mySlot] = placed[size_t(rank)];
  const char *nodeName = env("SLURMD_NODENAME");
  int localId = mySlot;
  if (env("SLURM_LOCALID"))
    DTF_RETURN_IF_ERROR(readInt(env, "SLURM_LOCALID", &localId));
  if ((nodeName && nodes[size_t(myNode)] != nodeName) || localId != mySlot)
    return errorStatus(
        "Slurm put rank ", rank, " on ", nodeName ? nodeName : "?",
        " as its task ", localId, ", but -m ", distribution, " over ", listName,
        " '", list, "' with ", perNodeName, " '", perNode, "' puts it on ",
        nodes[size_t(myNode)], " as task ", mySlot,
        "; srun laid the step out in a way --cluster slurm cannot follow "
        "(use -m block or -m cyclic, without --arbitrary or a hostfile)");

  std::vector<int> ports;
  if (const char *resv = env("SLURM_STEP_RESV_PORTS")) {
    s = expandPortList(resv, &ports);
    if (!s.isOk())
      return errorStatus("SLURM_STEP_RESV_PORTS: ", s.message());
    const int most = *std::max_element(slots.begin(), slots.end());
    if (int(ports.size()) < most)
      return errorStatus(
          "SLURM_STEP_RESV_PORTS '", resv, "' has ", ports.size(),
          " port(s) but a node runs ", most,
          " tasks; reserve one per task (srun --resv-ports=", most, ")");
  } else {
    const int most = *std::max_element(slots.begin(), slots.end());
    if (options.portBase < 1 || options.portBase + most - 1 > 65535)
      return errorStatus("--slurm-port-base ", options.portBase,
                         ": the ports up to ", options.portBase + most - 1,
                         " are not all in 1 to 65535");
    for (int k = 0; k < most; ++k)
      ports.push_back(options.portBase + k);
  }

  // Ranks to jobs: each listed job takes the next ranks; workers the rest.
  std::map<std::string, std::vector<std::string>> jobs;
  int next = 0;
  bool workersListed = false;
  for (const auto &[job, n] : options.jobs.counts) {
    if (job == kWorkerJob)
      workersListed = true;
    if (next + n > total)
      return errorStatus("--slurm-jobs asks for ", next + n,
                         " tasks but the Slurm step has ", total, " (srun -n",
                         total, ")");
    for (int k = 0; k < n; ++k, ++next) {
      if (rank == next)
        *task = TaskId{job, k};
      const auto [node, slot] = placed[size_t(next)];
      jobs[job].push_back(nodes[size_t(node)] + ":" +
                          std::to_string(ports[size_t(slot)]));
    }
    if (n == 0)
      jobs.erase(job);
  }
  if (workersListed && next != total)
    return errorStatus("--slurm-jobs gives jobs to ", next,
                       " tasks but the Slurm step has ", total,
                       "; leave worker=N out to give the rest to workers");
  for (int k = 0; next < total; ++k, ++next) {
    if (rank == next)
      *task = TaskId{kWorkerJob, k};
    const auto [node, slot] = placed[size_t(next)];
    jobs[kWorkerJob].push_back(nodes[size_t(node)] + ":" +
                               std::to_string(ports[size_t(slot)]));
  }
  std::string source = "the Slurm step";
  if (const char *job = env("SLURM_JOB_ID")) {
    source += std::string(" ") + job;
    if (const char *step = env("SLURM_STEP_ID"))
      source += std::string(".") + step;
  }
  s = ClusterSpec::fromJobs(jobs, source, out);
  if (!s.isOk())
    return errorStatus(s.message(), " (--slurm-jobs ",
                       "gives the ranks to jobs, in order)");
  return Status::ok();
}

} // namespace dtf::cluster
