// TFRecord framing, the container of TensorBoard's event files: each record
// is its length, a masked CRC-32C of the length, the data and a masked
// CRC-32C of the data.
#pragma once

#include "schema/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtf::summary {

/// Bytes around a record's data: the 8-byte length and its 4-byte CRC before,
/// the data's 4-byte CRC after.
constexpr size_t kRecordHeaderBytes = 12;
constexpr size_t kRecordFooterBytes = 4;

/// `data` framed as one TFRecord: uint64 little-endian length, uint32
/// little-endian masked CRC-32C of those 8 bytes, the data, uint32
/// little-endian masked CRC-32C of the data.
std::string encodeRecord(std::string_view data);

/// Splits `bytes` (a whole TFRecord file) into its records' data, checking
/// both CRCs of each. An error names `what` (a path) and the byte offset of
/// the first bad record; `records` then holds the good ones before it.
Status decodeRecords(std::string_view bytes, std::vector<std::string> *records,
                     const std::string &what = "records");

/// Reads and decodes a TFRecord file (decodeRecords over its bytes).
Status readRecordFile(const std::string &path,
                      std::vector<std::string> *records);

} // namespace dtf::summary
