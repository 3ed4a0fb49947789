x = bytearray(8 << 30)
