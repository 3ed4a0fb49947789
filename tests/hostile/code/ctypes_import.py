import ctypes

ctypes.CDLL(None).exit(0)
