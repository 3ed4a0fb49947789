import os

fd = os.open("MARKER", os.O_WRONLY | os.O_CREAT)
os.write(fd, b"escaped")
