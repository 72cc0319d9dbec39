// TFRecord framing over the runtime's CRC-32C.
#include "runtime/summary/Record.h"

#include "runtime/core/Crc32c.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace dtf::summary {
namespace {

// Little-endian whatever the host: the format is defined in bytes.
void putLittle(std::string *out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out->push_back(char((v >> (8 * i)) & 0xff));
}

uint64_t getLittle(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

uint32_t maskedCrc(const char *p, size_t n) {
  return crc32c::mask(crc32c::value(p, n));
}

} // namespace

std::string encodeRecord(std::string_view data) {
  std::string out;
  out.reserve(kRecordHeaderBytes + data.size() + kRecordFooterBytes);
  putLittle(&out, data.size(), 8);
  putLittle(&out, maskedCrc(out.data(), 8), 4);
  out.append(data);
  putLittle(&out, maskedCrc(data.data(), data.size()), 4);
  return out;
}

Status decodeRecords(std::string_view bytes, std::vector<std::string> *records,
                     const std::string &what) {
  records->clear();
  size_t at = 0;
  while (at < bytes.size()) {
    const char *p = bytes.data() + at;
    const size_t left = bytes.size() - at;
    if (left < kRecordHeaderBytes)
      return errorStatus(what, ": truncated record header at byte ", at, " (",
                         left, " bytes left, a header is 12)");
    const uint64_t length = getLittle(p, 8);
    if (uint32_t(getLittle(p + 8, 4)) != maskedCrc(p, 8))
      return errorStatus(what, ": the length of the record at byte ", at,
                         " fails its CRC-32C check");
    if (length > left - kRecordHeaderBytes ||
        left - kRecordHeaderBytes - length < kRecordFooterBytes)
      return errorStatus(what, ": truncated record at byte ", at, " (length ",
                         length, ", ", left - kRecordHeaderBytes,
                         " bytes left)");
    const char *data = p + kRecordHeaderBytes;
    if (uint32_t(getLittle(data + length, 4)) != maskedCrc(data, length))
      return errorStatus(what, ": the data of the record at byte ", at,
                         " fails its CRC-32C check");
    records->emplace_back(data, size_t(length));
    at += kRecordHeaderBytes + length + kRecordFooterBytes;
  }
  return Status::ok();
}

Status readRecordFile(const std::string &path,
                      std::vector<std::string> *records) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return errorStatus(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream s;
  s << f.rdbuf();
  return decodeRecords(s.str(), records, path);
}

} // namespace dtf::summary
