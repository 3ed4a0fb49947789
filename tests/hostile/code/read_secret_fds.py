import os

got = b""
for fd in range(3, 256):
    try:
        got += os.read(fd, 64)
    except OSError:
        pass
for fd in range(3, 256):
    try:
        os.write(fd, got)
    except OSError:
        pass
os._exit(0)
