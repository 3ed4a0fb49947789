m = __import__("_ctypes")
