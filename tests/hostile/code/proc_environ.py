print(open("/proc/1/environ", "rb").read())
