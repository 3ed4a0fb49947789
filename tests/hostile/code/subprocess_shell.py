import subprocess

subprocess.run(["sh", "-c", "touch MARKER"])
