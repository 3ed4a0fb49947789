import gc

print(len(gc.get_objects()))
