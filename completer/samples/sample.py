"""A small sample module that `completer demo` completes line by line."""
import os
import sys
from pathlib import Path


def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


class Inventory:
    def __init__(self, name):
        self.name = name
        self.items = {}

    def add(self, item, count=1):
        self.items[item] = self.items.get(item, 0) + count

    def remove(self, item):
        if item not in self.items:
            raise KeyError(item)
        del self.items[item]

    def __len__(self):
        return len(self.items)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    for name in args:
        path = Path(name)
        if not path.exists():
            print(f"missing: {path}", file=sys.stderr)
            continue
        for line in read_lines(path):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
