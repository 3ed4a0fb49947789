import sys

f = sys._getframe()
while f.f_back:
    f = f.f_back
print(f.f_locals)
