"""TFRecord framing for the test tools that write TFRecord files by hand
(tests/fuzz/reader_seeds.py, tests/damage/damage_trial.py) and the one that
checks it (tests/summaries/check_run_dir.py): each record is
its length, the length's masked CRC-32C, the payload and the payload's masked
CRC-32C, as TensorFlow's writer frames it."""
import struct


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload):
    length = struct.pack("<Q", len(payload))
    return (length + struct.pack("<I", masked_crc(length)) + payload +
            struct.pack("<I", masked_crc(payload)))
