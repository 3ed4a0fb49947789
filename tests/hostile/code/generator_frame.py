def g():
    yield 1


fr = g().gi_frame
print(fr.f_back)
