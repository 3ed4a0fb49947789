import os

os.system("touch MARKER")
