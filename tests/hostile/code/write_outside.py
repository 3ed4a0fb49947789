open("MARKER", "w").write("escaped")
