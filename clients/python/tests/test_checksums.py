"""CRC-32C (pure Python) and CRC-32 against their standard check values and a bit-by-bit reference."""

import os
import unittest
import zlib

from hicache.checksums import CHECKSUM_CRC32, CHECKSUM_CRC32C, checksum_of_parts, crc32, crc32c


def crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


class ChecksumTest(unittest.TestCase):
    def test_crc32c_check_value(self):
        self.assertEqual(crc32c(b"123456789"), 0xE3069283)

    def test_crc32_check_value(self):
        self.assertEqual(crc32(b"123456789"), 0xCBF43926)

    def test_crc32c_of_nothing_is_zero(self):
        self.assertEqual(crc32c(b""), 0)

    def test_crc32c_matches_bitwise_reference_at_every_length_and_alignment(self):
        data = os.urandom(80)
        for start in range(8):
            for end in range(start, len(data) + 1, 3):
                self.assertEqual(crc32c(memoryview(data)[start:end]), crc32c_bitwise(data[start:end]), (start, end))

    def test_crc32c_continues_across_parts(self):
        data = os.urandom(1000)
        self.assertEqual(crc32c(data[333:], crc32c(data[:333])), crc32c(data))
        self.assertEqual(checksum_of_parts(CHECKSUM_CRC32C, [data[:10], data[10:999], data[999:]]), crc32c(data))
        self.assertEqual(checksum_of_parts(CHECKSUM_CRC32, [data[:500], data[500:]]), zlib.crc32(data))

    def test_crc32c_takes_any_contiguous_buffer(self):
        import ctypes
        raw = (ctypes.c_uint16 * 6)(*range(6))
        self.assertEqual(crc32c(raw), crc32c_bitwise(bytes(raw)))
        self.assertEqual(crc32c(bytearray(b"123456789")), 0xE3069283)


if __name__ == "__main__":
    unittest.main()
