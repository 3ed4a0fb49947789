def solution():
    return 0
x = """
