import sys

while True:
    sys.stdout.write("x" * 65536)
