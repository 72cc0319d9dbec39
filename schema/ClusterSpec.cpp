// ClusterSpec: parsing and checking cluster.json and TF_CONFIG.
#include "schema/ClusterSpec.h"
#include "schema/PlanSchema.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ifaddrs.h>
#include <net/if.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

namespace dtf::cluster {
namespace {

using nlohmann::json;

const char *const kJobs[] = {kChiefJob, kPsJob, kWorkerJob, kEvaluatorJob};
constexpr const char *kJobList = "chief (or master), ps, worker and evaluator";
// Kubeflow's training operator names the chief's replica type "Master" in
// older TFJobs and writes it lower case.
constexpr const char *kMasterJob = "master";
constexpr const char *kExample =
    R"({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]})";

bool isKnownJob(const std::string &job) {
  return std::find_if(std::begin(kJobs), std::end(kJobs), [&](const char *j) {
           return job == j;
         }) != std::end(kJobs);
}

std::string lower(std::string s) {
  for (char &c : s)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Levenshtein distance, to suggest the job a typo meant.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "unknown job 'wroker' (did you mean 'worker'?); the jobs are ..."
std::string unknownJobMessage(const std::string &job) {
  std::string message = "unknown job '" + job + "'";
  const std::string l = lower(job);
  for (const char *known : kJobs) {
    if (l == known || (editDistance(l, known) <= 2 && l.size() >= 2)) {
      message += std::string(" (did you mean '") + known + "'?)";
      break;
    }
  }
  return message + "; the jobs are " + kJobList;
}

const char *jsonKind(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  case json::value_t::string:
    return "a string";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::binary:
    return "binary data";
  case json::value_t::discarded:
    return "nothing";
  default:
    return "a number";
  }
}

// 1-based line and column (in characters) of the byte nlohmann stopped at.
void lineColumnOf(const std::string &text, size_t byte, int *line,
                  int *column) {
  // nlohmann counts the bytes it has read: the offending character is the
  // last one, at index byte - 1 (byte == size + 1 is the end of the input).
  size_t at = byte == 0 ? 0 : byte - 1;
  at = std::min(at, text.size());
  *line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++*line;
      lineStart = i + 1;
    }
  }
  *column = 1;
  for (size_t i = lineStart; i < at; ++i) {
    // UTF-8 continuation bytes do not start a character.
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80)
      ++*column;
  }
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line
// 1, column 5: syntax error while parsing ..."; keep the part after the
// position, which the caller gives in file:line:column form.
std::string parseErrorDetail(const std::string &what) {
  size_t at = what.find("parse error");
  if (at != std::string::npos) {
    size_t colon = what.find(": ", at);
    if (colon != std::string::npos)
      return what.substr(colon + 2);
  }
  size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

bool isLoopbackName(const std::string &host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1";
}

// The canonical text of a numeric address, or "" when `host` is a name.
std::string canonicalAddress(const std::string &host) {
  std::string h = host;
  size_t percent = h.find('%'); // fe80::1%eth0
  if (percent != std::string::npos)
    h = h.substr(0, percent);
  char buffer[INET6_ADDRSTRLEN] = {};
  unsigned char bytes[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, h.c_str(), bytes) == 1 &&
      inet_ntop(AF_INET, bytes, buffer, sizeof buffer))
    return buffer;
  if (inet_pton(AF_INET6, h.c_str(), bytes) == 1 &&
      inet_ntop(AF_INET6, bytes, buffer, sizeof buffer))
    return buffer;
  return "";
}

Status checkJobs(const std::map<std::string, std::vector<std::string>> &jobs,
                 const std::string &source) {
  // Unknown job names first: a typo'd "wroker" is a better message than "no
  // worker job".
  for (const auto &[job, addresses] : jobs) {
    if (!isKnownJob(job))
      return errorStatus(source, ": ", unknownJobMessage(job));
  }
  for (const auto &[job, addresses] : jobs) {
    if (addresses.empty())
      return errorStatus(source, ": job '", job,
                         "' has no tasks; give at least one \"host:port\" "
                         "address or leave the job out");
  }
  if (!jobs.count(kWorkerJob))
    return errorStatus(source,
                       ": the cluster has no 'worker' job; every cluster "
                       "needs at least one worker, e.g. ",
                       kExample);
  auto chief = jobs.find(kChiefJob);
  if (chief != jobs.end() && chief->second.size() > 1)
    return errorStatus(source, ": job 'chief' has ", chief->second.size(),
                       " tasks; a cluster has at most one chief (make the "
                       "others workers)");
  auto evaluator = jobs.find(kEvaluatorJob);
  if (evaluator != jobs.end() && evaluator->second.size() > 1)
    return errorStatus(source, ": job 'evaluator' has ",
                       evaluator->second.size(),
                       " tasks; a cluster has at most one evaluator");

  // Every address well formed, and no two tasks on one address. Loopback
  // spellings (localhost, 127.0.0.1, ::1) are the same machine.
  // normalized address -> (task, address as written)
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (const char *job : kJobs) {
    auto it = jobs.find(job);
    if (it == jobs.end())
      continue;
    for (size_t i = 0; i < it->second.size(); ++i) {
      const std::string where = strCat(job, "[", i, "]");
      const std::string &address = it->second[i];
      HostPort hp;
      DTF_RETURN_IF_ERROR(
          parseHostPort(address, strCat(source, ": ", where), &hp));
      std::string host = lower(hp.host);
      std::string numeric = canonicalAddress(host);
      if (!numeric.empty())
        host = numeric;
      if (isLoopbackName(host))
        host = "localhost";
      const std::string key = host + ":" + std::to_string(hp.port);
      auto [prior, inserted] =
          seen.emplace(key, std::make_pair(where, address));
      if (inserted)
        continue;
      const auto &[priorWhere, priorAddress] = prior->second;
      if (lower(priorAddress) == lower(address))
        return errorStatus(source, ": ", priorWhere, " and ", where,
                           " have the same address '", address,
                           "'; every task needs its own host:port");
      return errorStatus(source, ": ", priorWhere, " ('", priorAddress,
                         "') and ", where, " ('", address,
                         "') are the same address; every task needs its "
                         "own host:port");
    }
  }
  return Status::ok();
}

Status readJobs(const json &cluster, const std::string &source,
                std::map<std::string, std::vector<std::string>> *jobs) {
  if (!cluster.is_object())
    return errorStatus(source,
                       ": expected a JSON object mapping job names to lists "
                       "of \"host:port\" addresses, e.g. ",
                       kExample, "; got ", jsonKind(cluster));
  if (cluster.contains(kMasterJob) && cluster.contains(kChiefJob))
    return errorStatus(source,
                       ": has both 'master' and 'chief'; they are the same "
                       "job (Kubeflow's name and TensorFlow's), give one");
  for (const auto &[name, value] : cluster.items()) {
    const std::string job = name == kMasterJob ? kChiefJob : name;
    if (!isKnownJob(job))
      return errorStatus(source, ": ", unknownJobMessage(job));
    if (!value.is_array())
      return errorStatus(source, ": job '", job,
                         "' must be a list of \"host:port\" strings, got ",
                         jsonKind(value), " (e.g. \"", job,
                         "\": [\"localhost:2222\"])");
    std::vector<std::string> &addresses = (*jobs)[job];
    for (size_t i = 0; i < value.size(); ++i) {
      const json &a = value[i];
      if (!a.is_string())
        return errorStatus(source, ": ", job, "[", i,
                           "] must be a \"host:port\" string, got ", a.dump());
      addresses.push_back(a.get<std::string>());
    }
  }
  return checkJobs(*jobs, source);
}

Status readTask(const json &task, const std::string &source,
                const std::map<std::string, std::vector<std::string>> &jobs,
                TaskId *out) {
  if (!task.is_object())
    return errorStatus(source,
                       ": 'task' must be an object like {\"type\": "
                       "\"worker\", \"index\": 0}, got ",
                       jsonKind(task));
  auto type = task.find("type");
  if (type == task.end() || !type->is_string())
    return errorStatus(source,
                       ": 'task' needs a string 'type' (the task's job: "
                       "chief, ps or worker)");
  auto index = task.find("index");
  long long i = 0; // TF defaults a missing index to 0
  if (index != task.end()) {
    if (!index->is_number_integer() || index->get<long long>() < 0)
      return errorStatus(source,
                         ": 'task' index must be a non-negative integer, got ",
                         index->dump());
    i = index->get<long long>();
  }
  std::string job = type->get<std::string>();
  if (job == kMasterJob)
    job = kChiefJob;
  if (!isKnownJob(job))
    return errorStatus(source, ": task type '", job,
                       "': ", unknownJobMessage(job));
  auto it = jobs.find(job);
  if (it == jobs.end())
    return errorStatus(source, ": task type '", job,
                       "' is not a job of the cluster");
  if (i >= (long long)it->second.size())
    return errorStatus(source, ": task index ", i, " is out of range: job '",
                       job, "' has ", it->second.size(), " task",
                       it->second.size() == 1 ? "" : "s", " (indices 0 to ",
                       it->second.size() - 1, ")");
  out->job = job;
  out->index = int(i);
  return Status::ok();
}

std::string
jobNames(const std::map<std::string, std::vector<std::string>> &jobs) {
  std::string names;
  for (const auto &[job, addresses] : jobs)
    names += (names.empty() ? "" : ", ") + job;
  return names;
}

} // namespace

std::string TaskId::str() const { return job + "." + std::to_string(index); }

std::string TaskId::deviceName() const {
  return "/job:" + job + "/task:" + std::to_string(index);
}

const LocalHost &LocalHost::current() {
  static const LocalHost self = [] {
    LocalHost h;
    char name[HOST_NAME_MAX + 1] = {};
    if (gethostname(name, sizeof name - 1) == 0)
      h.hostname = lower(name);
    struct ifaddrs *list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (struct ifaddrs *a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr)
          continue;
        char buffer[INET6_ADDRSTRLEN] = {};
        const int family = a->ifa_addr->sa_family;
        const void *bytes = nullptr;
        if (family == AF_INET)
          bytes =
              &reinterpret_cast<struct sockaddr_in *>(a->ifa_addr)->sin_addr;
        else if (family == AF_INET6)
          bytes =
              &reinterpret_cast<struct sockaddr_in6 *>(a->ifa_addr)->sin6_addr;
        if (bytes && inet_ntop(family, bytes, buffer, sizeof buffer))
          h.addresses.push_back(buffer);
      }
      freeifaddrs(list);
    }
    return h;
  }();
  return self;
}

bool isLocalHost(const std::string &hostIn, const LocalHost &self) {
  std::string host = lower(hostIn);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty())
    return false;
  if (host == "localhost" || host == "localhost.localdomain" ||
      host == "ip6-localhost")
    return true;
  const std::string numeric = canonicalAddress(host);
  if (!numeric.empty()) {
    if (numeric.rfind("127.", 0) == 0 || numeric == "0.0.0.0" ||
        numeric == "::1" || numeric == "::" ||
        numeric.rfind("::ffff:127.", 0) == 0)
      return true;
    for (const std::string &mine : self.addresses) {
      if (canonicalAddress(mine) == numeric)
        return true;
    }
    return false;
  }
  const std::string &me = self.hostname;
  if (me.empty())
    return false;
  if (host == me)
    return true;
  // "node1" against "node1.cluster.local", either way round: a short host
  // name matches its qualified form (a short name in the spec resolves
  // through the search domain to this machine's).
  auto isPrefixLabel = [](const std::string &shortName,
                          const std::string &longName) {
    return shortName.find('.') == std::string::npos &&
           longName.size() > shortName.size() &&
           longName.compare(0, shortName.size(), shortName) == 0 &&
           longName[shortName.size()] == '.';
  };
  return isPrefixLabel(me, host) || isPrefixLabel(host, me);
}

namespace {

// Why `host` (without brackets) is neither an IP literal nor an RFC 1123
// host name of at most 253 characters in labels of 1 to 63 letters, digits
// and inner hyphens (one trailing dot allowed); "" when it is one of them.
std::string invalidHost(const std::string &host) {
  if (!canonicalAddress(host).empty()) {
    const size_t percent = host.find('%'); // an IPv6 zone: an interface name
    if (percent == std::string::npos)
      return "";
    const std::string zone = host.substr(percent + 1);
    return !zone.empty() && zone.size() < IF_NAMESIZE &&
                   std::all_of(zone.begin(), zone.end(),
                               [](char c) {
                                 return std::isalnum((unsigned char)c) ||
                                        c == '-' || c == '_' || c == '.';
                               })
               ? ""
               : "its IPv6 zone is not an interface name";
  }
  if (host.find(':') != std::string::npos)
    return "it has a ':' but is not an IPv6 address";
  std::string name = host;
  if (!name.empty() && name.back() == '.')
    name.pop_back();
  if (name.size() > 253)
    return strCat("it has ", host.size(),
                  " characters; a host name has at most 253");
  bool numeric = true;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string::npos)
      end = name.size();
    const std::string label = name.substr(start, end - start);
    if (label.empty() || label.size() > 63)
      return label.empty() ? "it has an empty label (two dots, or a dot first)"
                           : "a label has more than 63 characters";
    for (char c : label)
      if (!std::isalnum((unsigned char)c) && c != '-')
        return strCat("it holds '", ::dtf::plan::printable(std::string(1, c)),
                      "'; a host name holds letters, digits, '-' and '.'");
    if (label.front() == '-' || label.back() == '-')
      return "a label starts or ends with '-'";
    numeric = numeric && label.find_first_not_of("0123456789") ==
                             std::string::npos;
    start = end + 1;
  }
  if (numeric)
    return "it is all digits and dots but not an IPv4 address";
  return "";
}

} // namespace

Status parseHostPort(const std::string &address, const std::string &where,
                     HostPort *out) {
  // Before any message quotes it: no control bytes, and a bounded length.
  if (address.size() > 253 + 2 + 6 ||
      std::any_of(address.begin(), address.end(), [](char c) {
        return (unsigned char)c < 0x20 || (unsigned char)c >= 0x7f;
      }))
    return errorStatus(
        where, ": address '",
        ::dtf::plan::printable(address.substr(0, 80)),
        address.size() > 80 ? strCat("...' (", address.size(), " bytes)")
                            : std::string("'"),
        " is not host:port: a host is a name of at most 253 "
        "characters (letters, digits, '-', '.') or an IP address");
  std::string host, port;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos)
      return errorStatus(where, ": address '", address,
                         "' has no ']' closing its IPv6 host");
    host = address.substr(1, close - 1);
    if (close + 1 == address.size())
      return errorStatus(where, ": address '", address,
                         "' has no port; write it as [host]:port, e.g. '[",
                         host, "]:2222'");
    if (address[close + 1] != ':')
      return errorStatus(where, ": address '", address,
                         "' has text after its IPv6 host that is not a port");
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos)
      return errorStatus(where, ": address '", address,
                         "' has no port; write it as host:port, e.g. '",
                         address.empty() ? "localhost" : address, ":2222'");
    if (address.find(':') != colon)
      return errorStatus(where, ": address '", address,
                         "' looks like an IPv6 address; put the host in "
                         "brackets, e.g. '[::1]:2222'");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (host.empty())
    return errorStatus(where, ": address '", address, "' has no host");
  if (std::string why = invalidHost(host); !why.empty())
    return errorStatus(where, ": address '", address, "' has an invalid host '",
                       host, "': ", why,
                       " (hosts are RFC 1123 names or IP addresses)");
  if (port.empty())
    return errorStatus(where, ": address '", address,
                       "' has no port after ':'");
  if (!std::all_of(port.begin(), port.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return errorStatus(where, ": port '", port, "' of '", address,
                       "' is not a number");
  const long long p = port.size() > 6 ? LLONG_MAX : std::stoll(port);
  if (p < 1 || p > 65535)
    return errorStatus(where, ": port ", port, " of '", address,
                       "' is out of range; ports are 1 to 65535");
  out->host = host;
  out->port = int(p);
  return Status::ok();
}

Status ClusterSpec::parseJson(const std::string &text,
                              const std::string &sourceName, ClusterSpec *out,
                              std::optional<TaskId> *task) {
  if (task)
    task->reset();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    return errorStatus(sourceName, ": is empty; expected a cluster like ",
                       kExample);

  // nlohmann's lexer takes a NUL byte for the end of the input: whatever
  // follows one would be ignored without a word.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    int line = 0, column = 0;
    lineColumnOf(text, nul + 1, &line, &column);
    return errorStatus(sourceName, ":", line, ":", column,
                       ": a NUL byte (offset ", nul,
                       "): a cluster is JSON text; is this the right file?");
  }

  // nlohmann keeps the last of two equal keys; a job given twice would lose
  // tasks without a word, so the parse callback looks for repeated keys.
  std::vector<std::set<std::string>> keysPerObject;
  std::string duplicateKey;
  int duplicateDepth = 0;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event,
                                         json &parsed) {
    if (event == json::parse_event_t::object_start)
      keysPerObject.emplace_back();
    else if (event == json::parse_event_t::object_end)
      keysPerObject.pop_back();
    else if (event == json::parse_event_t::key && duplicateKey.empty() &&
             !keysPerObject.empty() &&
             !keysPerObject.back().insert(parsed.get<std::string>()).second) {
      duplicateKey = parsed.get<std::string>();
      duplicateDepth = depth;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text, callback);
  } catch (const json::parse_error &e) {
    int line = 0, column = 0;
    lineColumnOf(text, e.byte, &line, &column);
    return errorStatus(sourceName, ":", line, ":", column,
                       ": invalid JSON: ", parseErrorDetail(e.what()));
  } catch (const json::exception &e) {
    // A number beyond a double (out_of_range 406), found by the fuzzer.
    return errorStatus(sourceName, ": invalid JSON: ",
                       ::dtf::plan::printable(parseErrorDetail(e.what())));
  }
  if (!duplicateKey.empty())
    return errorStatus(sourceName, ": key '", duplicateKey, "' is given twice",
                       duplicateDepth <= 1 ? "" : " in one object",
                       "; merge the two");

  std::map<std::string, std::vector<std::string>> jobs;
  std::string environment;
  if (root.is_object() && (root.contains("cluster") || root.contains("task"))) {
    // TF_CONFIG's full form.
    for (const auto &[key, value] : root.items()) {
      (void)value;
      if (key != "cluster" && key != "task" && key != "environment" &&
          key != "rpc_layer")
        return errorStatus(sourceName, ": unknown key '", key,
                           "'; a TF_CONFIG holds 'cluster' and 'task' (and "
                           "TensorFlow's 'environment' and 'rpc_layer')");
    }
    if (!root.contains("cluster"))
      return errorStatus(sourceName,
                         ": has a 'task' but no 'cluster'; TF_CONFIG's form "
                         "is {\"cluster\": ",
                         kExample,
                         ", \"task\": {\"type\": \"worker\", "
                         "\"index\": 0}}");
    DTF_RETURN_IF_ERROR(readJobs(root["cluster"], sourceName, &jobs));
    if (root.contains("environment")) {
      if (!root["environment"].is_string())
        return errorStatus(sourceName,
                           ": 'environment' must be a string such as "
                           "\"cloud\", got ",
                           jsonKind(root["environment"]));
      environment = root["environment"].get<std::string>();
    }
    if (root.contains("task")) {
      TaskId id;
      DTF_RETURN_IF_ERROR(readTask(root["task"], sourceName, jobs, &id));
      if (task)
        *task = id;
    }
  } else {
    DTF_RETURN_IF_ERROR(readJobs(root, sourceName, &jobs));
  }
  out->source_ = sourceName;
  out->environment_ = environment;
  out->jobs_ = std::move(jobs);
  return Status::ok();
}

Status ClusterSpec::parseFile(const std::string &path, ClusterSpec *out,
                              std::optional<TaskId> *task) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return errorStatus(
        path, ": cannot open the cluster file: ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return errorStatus(
        path, ": cannot read the cluster file: ", std::strerror(errno));
  return parseJson(text.str(), path, out, task);
}

Status ClusterSpec::fromEnvironment(ClusterSpec *out,
                                    std::optional<TaskId> *task, bool *found) {
  const char *value = std::getenv("TF_CONFIG");
  *found = false;
  if (task)
    task->reset();
  if (!value ||
      std::string(value).find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::ok();
  *found = true;
  return parseJson(value, "TF_CONFIG", out, task);
}

Status ClusterSpec::fromJobs(
    const std::map<std::string, std::vector<std::string>> &jobs,
    const std::string &sourceName, ClusterSpec *out) {
  DTF_RETURN_IF_ERROR(checkJobs(jobs, sourceName));
  out->source_ = sourceName;
  out->jobs_ = jobs;
  return Status::ok();
}

int ClusterSpec::numTasks(const std::string &job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : int(it->second.size());
}

std::string ClusterSpec::address(const TaskId &task) const {
  auto it = jobs_.find(task.job);
  if (it == jobs_.end() || task.index < 0 ||
      task.index >= int(it->second.size()))
    return "";
  return it->second[task.index];
}

Status ClusterSpec::setChief(const TaskId &task) {
  if ((task.job != kWorkerJob && task.job != kChiefJob) || task.index < 0 ||
      task.index >= numTasks(task.job))
    return errorStatus("--chief ", task.str(), ": ", source_, " has no such ",
                       "worker (the chief role goes to a task of the worker ",
                       "or chief job, e.g. worker.1)");
  chief_ = task;
  return Status::ok();
}

Status ClusterSpec::keepFirstPs(int n) {
  const int slots = numPs();
  if (slots == 0)
    return errorStatus("--ps ", n, ": ", source_,
                       " has no ps job (\"ps\": [\"host:port\", ...])");
  if (n < 1 || n > slots)
    return errorStatus("--ps ", n, ": ", source_, " has ", slots, " ps task",
                       slots == 1 ? "" : "s",
                       "; the job runs over the first N of them, N from 1 to ",
                       slots, " (add ps addresses to the file for more)");
  jobs_[kPsJob].resize(size_t(n));
  return Status::ok();
}

TaskId ClusterSpec::chief() const {
  if (chief_)
    return *chief_;
  if (hasJob(kChiefJob))
    return TaskId{kChiefJob, 0};
  return TaskId{kWorkerJob, 0};
}

std::vector<TaskId> ClusterSpec::allTasks() const {
  std::vector<TaskId> tasks;
  for (const char *job : kJobs) {
    for (int i = 0; i < numTasks(job); ++i)
      tasks.push_back(TaskId{job, i});
  }
  return tasks;
}

bool ClusterSpec::isLocal(const TaskId &task) const {
  return isLocal(task, LocalHost::current());
}

bool ClusterSpec::isLocal(const TaskId &task, const LocalHost &self) const {
  HostPort hp;
  if (!parseHostPort(address(task), "", &hp).isOk())
    return false;
  return isLocalHost(hp.host, self);
}

Status ClusterSpec::checkTask(const TaskId &task,
                              const std::string &origin) const {
  if (!isKnownJob(task.job))
    return errorStatus(origin, ": ", unknownJobMessage(task.job));
  auto it = jobs_.find(task.job);
  if (it == jobs_.end())
    return errorStatus(origin, ": ", source_, " has no job '", task.job,
                       "' (its jobs: ", jobNames(jobs_), ")");
  const int n = int(it->second.size());
  if (task.index < 0 || task.index >= n)
    return errorStatus(origin, ": task ", task.index, " is out of range: job '",
                       task.job, "' of ", source_, " has ", n, " task",
                       n == 1 ? "" : "s", " (indices 0 to ", n - 1, ")");
  return Status::ok();
}

Status ClusterSpec::checkJobSize(const std::string &job, int needed,
                                 const std::string &what) const {
  const int n = numTasks(job);
  if (n >= needed)
    return Status::ok();
  return errorStatus(what, " but ", source_, " has ", n, " '", job, "' task",
                     n == 1 ? "" : "s", "; add ", needed - n, " more to its '",
                     job, "' list or compile the plan for ", n);
}

} // namespace dtf::cluster
