import os

if os.fork() == 0:
    open("MARKER", "w")
