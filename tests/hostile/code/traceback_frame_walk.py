try:
    raise ValueError
except ValueError as e:
    f = e.__traceback__.tb_frame
    while f.f_back:
        f = f.f_back
    print(f.f_locals)
