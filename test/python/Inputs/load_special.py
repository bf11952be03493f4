"""Loads each path as an artifact and as weights; prints each refusal."""
import sys

import tensorc

for path in sys.argv[1:]:
    for what, load in (("artifact", tensorc.Executable.load), ("weights", tensorc.Weights)):
        try:
            load(path)
            print(f"{what} {path}: accepted")
        except tensorc.Error as e:
            print(f"{what}: {e}")
